/*
 * The structs of the C Data and C Stream interfaces that arrow-device's
 * native library touches, written from CDataInterface.rst ("The
 * ArrowArray structure") and CStreamInterface.rst ("The ArrowArrayStream
 * structure"); ArrowSchema stays opaque (only pointers to it pass here).
 * Shared by native/async-ring.c and native/adbc-run.c.
 */
#ifndef ARROW_DEVICE_ARROW_ABI_H
#define ARROW_DEVICE_ARROW_ABI_H

#include <stdint.h>

struct ArrowSchema;

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};

#endif
