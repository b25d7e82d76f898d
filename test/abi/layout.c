/*
 * The struct definitions of the Arrow C Data, C Stream and C Device Data
 * interfaces, written here from the spec text (../shared/spec), and a table
 * of sizeof/alignof/offsetof for every struct and field. Built natively it
 * prints the table as JSON; built for wasm32 it exports the table through
 * functions the test calls. test/abi/layout.test.ts compares the table with
 * src/abi.
 *
 * Two deliberate departures from the spec text, as in Arrow C++'s abi.h:
 * ArrowAsyncProducer has no `release` member, and extract_data takes a
 * `struct ArrowAsyncTask*`.
 */
#include <stddef.h>
#include <stdint.h>

#include "../include/arrow_c_abi.h"

struct entry {
  const char* key;
  int64_t value;
};

#define SIZE(S) {#S ".sizeof", (int64_t)sizeof(struct S)}, {#S ".alignof", (int64_t)_Alignof(struct S)}
#define OFF(S, F) {#S "." #F, (int64_t)offsetof(struct S, F)}

static const struct entry entries[] = {
  SIZE(ArrowSchema),
  OFF(ArrowSchema, format), OFF(ArrowSchema, name), OFF(ArrowSchema, metadata), OFF(ArrowSchema, flags),
  OFF(ArrowSchema, n_children), OFF(ArrowSchema, children), OFF(ArrowSchema, dictionary),
  OFF(ArrowSchema, release), OFF(ArrowSchema, private_data),

  SIZE(ArrowArray),
  OFF(ArrowArray, length), OFF(ArrowArray, null_count), OFF(ArrowArray, offset), OFF(ArrowArray, n_buffers),
  OFF(ArrowArray, n_children), OFF(ArrowArray, buffers), OFF(ArrowArray, children), OFF(ArrowArray, dictionary),
  OFF(ArrowArray, release), OFF(ArrowArray, private_data),

  SIZE(ArrowArrayStream),
  OFF(ArrowArrayStream, get_schema), OFF(ArrowArrayStream, get_next), OFF(ArrowArrayStream, get_last_error),
  OFF(ArrowArrayStream, release), OFF(ArrowArrayStream, private_data),

  SIZE(ArrowDeviceArray),
  OFF(ArrowDeviceArray, array), OFF(ArrowDeviceArray, device_id), OFF(ArrowDeviceArray, device_type),
  OFF(ArrowDeviceArray, sync_event), OFF(ArrowDeviceArray, reserved),

  SIZE(ArrowDeviceArrayStream),
  OFF(ArrowDeviceArrayStream, device_type), OFF(ArrowDeviceArrayStream, get_schema),
  OFF(ArrowDeviceArrayStream, get_next), OFF(ArrowDeviceArrayStream, get_last_error),
  OFF(ArrowDeviceArrayStream, release), OFF(ArrowDeviceArrayStream, private_data),

  SIZE(ArrowAsyncTask),
  OFF(ArrowAsyncTask, extract_data), OFF(ArrowAsyncTask, private_data),

  SIZE(ArrowAsyncProducer),
  OFF(ArrowAsyncProducer, device_type), OFF(ArrowAsyncProducer, request), OFF(ArrowAsyncProducer, cancel),
  OFF(ArrowAsyncProducer, additional_metadata), OFF(ArrowAsyncProducer, private_data),

  SIZE(ArrowAsyncDeviceStreamHandler),
  OFF(ArrowAsyncDeviceStreamHandler, on_schema), OFF(ArrowAsyncDeviceStreamHandler, on_next_task),
  OFF(ArrowAsyncDeviceStreamHandler, on_error), OFF(ArrowAsyncDeviceStreamHandler, release),
  OFF(ArrowAsyncDeviceStreamHandler, producer), OFF(ArrowAsyncDeviceStreamHandler, private_data),
};

#define N_ENTRIES ((int)(sizeof(entries) / sizeof(entries[0])))

#ifdef __wasm__
/* No libc in wasm32: the test reads the table through these exports. */
__attribute__((export_name("n_entries"))) int n_entries(void) { return N_ENTRIES; }
__attribute__((export_name("entry_key"))) const char* entry_key(int i) { return entries[i].key; }
__attribute__((export_name("entry_value"))) int64_t entry_value(int i) { return entries[i].value; }
__attribute__((export_name("pointer_size"))) int pointer_size(void) { return (int)sizeof(void*); }
#else
#include <stdio.h>
int main(void) {
  printf("{\"pointer_size\": %d", (int)sizeof(void*));
  for (int i = 0; i < N_ENTRIES; i++) printf(",\n \"%s\": %lld", entries[i].key, (long long)entries[i].value);
  printf("\n}\n");
  return 0;
}
#endif
