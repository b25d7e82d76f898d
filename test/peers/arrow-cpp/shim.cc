// A small C shim over Arrow C++ (the libarrow of the pyarrow wheel), so the
// tests can drive Arrow's reference implementation of the C Data, C Stream,
// C Device and async interfaces from JavaScript with koffi.
//
// Compiled at test time by setup.sh; nothing of Arrow is copied into the repo.
//
// Conventions:
// - Every function that can fail returns a malloc'd error string (free it with
//   arrow_shim_free_error), or NULL on success.
// - A "batches" handle (ArrowShimBatches) is a schema and a list of record
//   batches held by Arrow C++: read from an IPC file, or imported from C structs.
//   Exports from a handle stay valid after the handle is freed (Arrow keeps the
//   buffers alive until the consumer calls release).
// - Imports take ownership as the spec says: the C structs are moved (their
//   release is NULL afterwards), on success and on failure.
// - Struct memory (the 72/80/128/... bytes) always belongs to the caller.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/util/async_generator.h>
#include <arrow/util/future.h>
#include <arrow/util/thread_pool.h>

using arrow::Status;

struct ArrowShimBatches {
  std::shared_ptr<arrow::Schema> schema;
  arrow::RecordBatchVector batches;
};

namespace {

char* Error(const std::string& message) { return strdup(message.c_str()); }
char* Error(const Status& st) { return st.ok() ? nullptr : Error(st.ToString()); }

// Runs `fn` (returning Status), turning a non-OK status or a C++ exception into an error string.
template <typename Fn>
char* Guard(Fn&& fn) {
  try {
    return Error(fn());
  } catch (const std::exception& e) {
    return Error(std::string("C++ exception: ") + e.what());
  }
}

// At most `n` characters of `s`, for messages.
std::string Clip(std::string s, size_t n = 4000) {
  if (s.size() > n) s = s.substr(0, n) + "\n... (" + std::to_string(s.size() - n) + " more characters)";
  return s;
}

const arrow::EqualOptions kEqual = arrow::EqualOptions::Defaults().nans_equal(true);

// The first difference in the values of two handles with equal schemas, batch by batch.
std::string BatchDifference(const ArrowShimBatches& expected, const ArrowShimBatches& actual) {
  std::ostringstream out;
  for (size_t i = 0; i < expected.batches.size(); ++i) {
    const auto& e = *expected.batches[i];
    const auto& a = *actual.batches[i];
    if (e.Equals(a, /*check_metadata=*/true, kEqual)) continue;
    out << "batch " << i << ": ";
    if (e.num_rows() != a.num_rows()) {
      out << "rows: expected " << e.num_rows() << ", actual " << a.num_rows();
      return out.str();
    }
    for (int c = 0; c < e.num_columns(); ++c) {
      if (e.column(c)->Equals(*a.column(c), kEqual)) continue;
      out << "column " << c << " (" << e.schema()->field(c)->ToString() << ") differs:\n"
          << Clip(e.column(c)->Diff(*a.column(c))) << "\n--- expected\n"
          << Clip(e.column(c)->ToString()) << "\n--- actual\n"
          << Clip(a.column(c)->ToString());
      return out.str();
    }
    out << "batches differ";
    return out.str();
  }
  return "";
}

// The first difference in the values of two handles with equal schemas, as
// tables: the same values in any chunking are equal.
arrow::Result<std::string> TableDifference(const ArrowShimBatches& expected, const ArrowShimBatches& actual) {
  ARROW_ASSIGN_OR_RAISE(auto e, arrow::Table::FromRecordBatches(expected.schema, expected.batches));
  ARROW_ASSIGN_OR_RAISE(auto a, arrow::Table::FromRecordBatches(actual.schema, actual.batches));
  std::ostringstream out;
  if (e->num_rows() != a->num_rows()) {
    out << "rows: expected " << e->num_rows() << ", actual " << a->num_rows();
    return out.str();
  }
  for (int c = 0; c < e->num_columns(); ++c) {
    if (e->column(c)->Equals(*a->column(c), kEqual)) continue;
    out << "column " << c << " (" << e->field(c)->ToString() << ") differs:\n--- expected\n"
        << Clip(e->column(c)->ToString()) << "\n--- actual\n"
        << Clip(a->column(c)->ToString());
    return out.str();
  }
  return std::string();
}

// The first difference between two handles, or the empty string. With
// `exact_batches`, the batches must match one to one; otherwise only the
// values matter (a file with no batches equals one empty batch).
arrow::Result<std::string> FirstDifference(const ArrowShimBatches& expected, const ArrowShimBatches& actual,
                                           bool exact_batches) {
  if (!expected.schema->Equals(*actual.schema, /*check_metadata=*/true)) {
    return "schemas differ:\n--- expected\n" + expected.schema->ToString(true) + "\n--- actual\n" +
           actual.schema->ToString(true);
  }
  if (expected.batches.size() == actual.batches.size()) return BatchDifference(expected, actual);
  if (exact_batches) {
    return "batch count: expected " + std::to_string(expected.batches.size()) + ", actual " +
           std::to_string(actual.batches.size());
  }
  return TableDifference(expected, actual);
}

// The batches of a handle as a reader (shares the batches, copies nothing).
arrow::Result<std::shared_ptr<arrow::RecordBatchReader>> ReaderOf(const ArrowShimBatches& h) {
  return arrow::RecordBatchReader::Make(h.batches, h.schema);
}

Status Drain(const std::shared_ptr<arrow::RecordBatchReader>& reader, ArrowShimBatches* out) {
  out->schema = reader->schema();
  for (;;) {
    std::shared_ptr<arrow::RecordBatch> batch;
    ARROW_RETURN_NOT_OK(reader->ReadNext(&batch));
    if (!batch) break;
    out->batches.push_back(std::move(batch));
  }
  return reader->Close();
}

void ReleaseArray(struct ArrowArray* a) {
  if (a && a->release) a->release(a);
}

}  // namespace

extern "C" {

void arrow_shim_free_error(char* error) { free(error); }

/// The Arrow C++ version, e.g. "26.0.1".
const char* arrow_shim_arrow_version() { return arrow::GetBuildInfo().version_string.c_str(); }

/// Bytes allocated in Arrow's default memory pool (exports hold their private
/// data there too): back to its starting value when nothing leaked.
int64_t arrow_shim_pool_bytes() { return arrow::default_memory_pool()->bytes_allocated(); }

void arrow_shim_batches_free(ArrowShimBatches* h) { delete h; }

int64_t arrow_shim_batches_count(const ArrowShimBatches* h) { return static_cast<int64_t>(h->batches.size()); }

/// Reads an Arrow IPC file (file format) into a new handle.
char* arrow_shim_read_ipc_file(const char* path, ArrowShimBatches** out) {
  *out = nullptr;
  return Guard([&]() -> Status {
    ARROW_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(path));
    ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
    auto h = std::make_unique<ArrowShimBatches>();
    h->schema = reader->schema();
    for (int i = 0; i < reader->num_record_batches(); ++i) {
      ARROW_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
      h->batches.push_back(std::move(batch));
    }
    ARROW_RETURN_NOT_OK(file->Close());
    *out = h.release();
    return Status::OK();
  });
}

/// Imports a schema and `n` struct arrays (arrow::ImportSchema / ImportRecordBatch)
/// into a new handle: the "peer imports ours" half of a round trip. Consumes
/// the schema and every array, also on failure.
char* arrow_shim_import(struct ArrowSchema* schema, struct ArrowArray** arrays, int64_t n, ArrowShimBatches** out) {
  *out = nullptr;
  int64_t next = 0;
  char* err = Guard([&]() -> Status {
    auto h = std::make_unique<ArrowShimBatches>();
    ARROW_ASSIGN_OR_RAISE(h->schema, arrow::ImportSchema(schema));
    for (; next < n;) {
      ARROW_ASSIGN_OR_RAISE(auto batch, arrow::ImportRecordBatch(arrays[next++], h->schema));
      h->batches.push_back(std::move(batch));
    }
    *out = h.release();
    return Status::OK();
  });
  if (schema->release) schema->release(schema);  // when ImportSchema failed
  for (; next < n; ++next) ReleaseArray(arrays[next]);
  return err;
}

/// The same for `ArrowDeviceArray`s (arrow::ImportDeviceRecordBatch, CPU memory mapper).
char* arrow_shim_import_device(struct ArrowSchema* schema, struct ArrowDeviceArray** arrays, int64_t n,
                               ArrowShimBatches** out) {
  *out = nullptr;
  int64_t next = 0;
  char* err = Guard([&]() -> Status {
    auto h = std::make_unique<ArrowShimBatches>();
    ARROW_ASSIGN_OR_RAISE(h->schema, arrow::ImportSchema(schema));
    for (; next < n;) {
      ARROW_ASSIGN_OR_RAISE(auto batch, arrow::ImportDeviceRecordBatch(arrays[next++], h->schema));
      h->batches.push_back(std::move(batch));
    }
    *out = h.release();
    return Status::OK();
  });
  if (schema->release) schema->release(schema);
  for (; next < n; ++next) ReleaseArray(&arrays[next]->array);
  return err;
}

/// Reads a whole `ArrowArrayStream` (arrow::ImportRecordBatchReader) into a new
/// handle, then releases the stream. Calls the stream's callbacks on this thread.
char* arrow_shim_import_stream(struct ArrowArrayStream* stream, ArrowShimBatches** out) {
  *out = nullptr;
  return Guard([&]() -> Status {
    ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ImportRecordBatchReader(stream));
    auto h = std::make_unique<ArrowShimBatches>();
    ARROW_RETURN_NOT_OK(Drain(reader, h.get()));
    *out = h.release();
    return Status::OK();
  });
}

/// The same for an `ArrowDeviceArrayStream` (arrow::ImportDeviceRecordBatchReader).
char* arrow_shim_import_device_stream(struct ArrowDeviceArrayStream* stream, ArrowShimBatches** out) {
  *out = nullptr;
  return Guard([&]() -> Status {
    ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ImportDeviceRecordBatchReader(stream));
    auto h = std::make_unique<ArrowShimBatches>();
    ARROW_RETURN_NOT_OK(Drain(reader, h.get()));
    *out = h.release();
    return Status::OK();
  });
}

/// Exports the handle's schema (arrow::ExportSchema) into a caller-provided struct.
char* arrow_shim_export_schema(const ArrowShimBatches* h, struct ArrowSchema* out) {
  return Guard([&]() { return arrow::ExportSchema(*h->schema, out); });
}

/// Exports batch i (arrow::ExportRecordBatch) as a struct array into a caller-provided struct.
char* arrow_shim_export_batch(const ArrowShimBatches* h, int64_t i, struct ArrowArray* out) {
  return Guard([&]() -> Status {
    if (i < 0 || i >= static_cast<int64_t>(h->batches.size())) return Status::IndexError("no batch ", i);
    return arrow::ExportRecordBatch(*h->batches[i], out);
  });
}

/// Exports batch i as an `ArrowDeviceArray` on the CPU (arrow::ExportDeviceRecordBatch, no sync event).
char* arrow_shim_export_device_batch(const ArrowShimBatches* h, int64_t i, struct ArrowDeviceArray* out) {
  return Guard([&]() -> Status {
    if (i < 0 || i >= static_cast<int64_t>(h->batches.size())) return Status::IndexError("no batch ", i);
    return arrow::ExportDeviceRecordBatch(*h->batches[i], nullptr, out);
  });
}

/// Exports the handle's batches as an `ArrowArrayStream` (arrow::ExportRecordBatchReader).
char* arrow_shim_export_stream(const ArrowShimBatches* h, struct ArrowArrayStream* out) {
  return Guard([&]() -> Status {
    ARROW_ASSIGN_OR_RAISE(auto reader, ReaderOf(*h));
    return arrow::ExportRecordBatchReader(reader, out);
  });
}

/// Exports the handle's batches as an `ArrowDeviceArrayStream` (arrow::ExportDeviceRecordBatchReader).
char* arrow_shim_export_device_stream(const ArrowShimBatches* h, struct ArrowDeviceArrayStream* out) {
  return Guard([&]() -> Status {
    ARROW_ASSIGN_OR_RAISE(auto reader, ReaderOf(*h));
    return arrow::ExportDeviceRecordBatchReader(reader, out);
  });
}

/// Compares two handles with Arrow's own Equals: schemas with metadata, then
/// each batch (NaN equals NaN); when the batch counts differ, an error with
/// `exact_batches`, else the values as tables (any chunking). Returns the
/// first difference as an error string (with Array::Diff and both columns
/// printed), NULL when equal.
char* arrow_shim_equals(const ArrowShimBatches* expected, const ArrowShimBatches* actual, int exact_batches) {
  try {
    auto d = FirstDifference(*expected, *actual, exact_batches != 0);
    if (!d.ok()) return Error(d.status());
    return d->empty() ? nullptr : Error(*d);
  } catch (const std::exception& e) {
    return Error(std::string("C++ exception: ") + e.what());
  }
}

/// A new handle with every batch sliced (RecordBatch::Slice, zero-copy: the
/// exports then carry a non-zero offset), clamped to each batch's length.
char* arrow_shim_slice(const ArrowShimBatches* h, int64_t offset, int64_t length, ArrowShimBatches** out) {
  *out = nullptr;
  return Guard([&]() -> Status {
    auto s = std::make_unique<ArrowShimBatches>();
    s->schema = h->schema;
    for (const auto& b : h->batches) {
      int64_t o = std::min(offset, b->num_rows());
      s->batches.push_back(b->Slice(o, std::min(length, b->num_rows() - o)));
    }
    *out = s.release();
    return Status::OK();
  });
}

/// The handle printed by Arrow (schema and every batch), for messages. Free with arrow_shim_free_error.
char* arrow_shim_batches_to_string(const ArrowShimBatches* h) {
  std::string s = h->schema->ToString(true);
  for (size_t i = 0; i < h->batches.size(); ++i) s += "\n-- batch " + std::to_string(i) + "\n" + h->batches[i]->ToString();
  return Error(s);
}

// --- async (arrow/c/bridge.h, EXPERIMENTAL in Arrow C++ >= 19) --------------------------

struct ArrowShimAsyncProducer {
  std::thread thread;
  Status status;
};

/// Starts producing the handle's batches into `handler` (a consumer's
/// ArrowAsyncDeviceStreamHandler, e.g. one written in JS) with
/// arrow::ExportAsyncRecordBatchReader, on a new thread: every handler
/// callback comes from a thread that is not the caller's. The handle may be
/// freed at once (the thread keeps the batches). Wait with arrow_shim_async_producer_wait.
char* arrow_shim_async_produce(const ArrowShimBatches* h, struct ArrowAsyncDeviceStreamHandler* handler,
                               ArrowShimAsyncProducer** out) {
  *out = nullptr;
  try {
    auto p = std::make_unique<ArrowShimAsyncProducer>();
    auto schema = h->schema;
    auto batches = h->batches;
    ArrowShimAsyncProducer* self = p.get();
    p->thread = std::thread([self, schema, batches, handler]() {
      auto gen = arrow::MakeVectorGenerator(batches);
      auto done = arrow::ExportAsyncRecordBatchReader(schema, std::move(gen), arrow::DeviceAllocationType::kCPU,
                                                      handler);
      self->status = done.status();  // waits until the generator is exhausted or an error/cancel
    });
    *out = p.release();
    return nullptr;
  } catch (const std::exception& e) {
    return Error(std::string("C++ exception: ") + e.what());
  }
}

/// Waits for the producer thread to finish (call it with koffi's async form:
/// the handler's callbacks need the JS thread), frees the producer and returns
/// the status of ExportAsyncRecordBatchReader's future.
char* arrow_shim_async_producer_wait(ArrowShimAsyncProducer* p) {
  p->thread.join();
  char* err = Error(p->status);
  delete p;
  return err;
}

struct ArrowShimAsyncConsumer {
  struct ArrowAsyncDeviceStreamHandler handler;
  arrow::Future<arrow::AsyncRecordBatchGenerator> schema_future;
};

namespace {
// Arrow C++'s handler release (the same function for every handler it makes).
std::atomic<void (*)(struct ArrowAsyncDeviceStreamHandler*)> arrow_handler_release{nullptr};

// Workaround: the release callback of a handler made by
// CreateAsyncDeviceStreamHandler (Arrow C++ 26.0.1) frees its private data but
// leaves `release` set, so nobody can tell that the producer has released it
// (the spec manages the handler's lifetime "as in the C data interface", where
// release marks the struct released). Wrap it to mark the handler released.
void MarkingHandlerRelease(struct ArrowAsyncDeviceStreamHandler* handler) {
  arrow_handler_release.load()(handler);
  handler->release = nullptr;
}
}  // namespace

/// A consumer made by arrow::CreateAsyncDeviceStreamHandler (executor: Arrow's
/// CPU thread pool). Hand arrow_shim_async_consumer_handler(c) to a producer,
/// then arrow_shim_async_consumer_collect to wait for what arrives.
char* arrow_shim_async_consumer_new(uint64_t queue_size, ArrowShimAsyncConsumer** out) {
  *out = nullptr;
  try {
    auto c = std::make_unique<ArrowShimAsyncConsumer>();
    std::memset(&c->handler, 0, sizeof(c->handler));
    c->schema_future =
        arrow::CreateAsyncDeviceStreamHandler(&c->handler, arrow::internal::GetCpuThreadPool(), queue_size);
    if (c->handler.release) {
      arrow_handler_release = c->handler.release;
      c->handler.release = MarkingHandlerRelease;
    }
    *out = c.release();
    return nullptr;
  } catch (const std::exception& e) {
    return Error(std::string("C++ exception: ") + e.what());
  }
}

struct ArrowAsyncDeviceStreamHandler* arrow_shim_async_consumer_handler(ArrowShimAsyncConsumer* c) {
  return &c->handler;
}

/// Waits for the schema, then for every batch until the end of the stream or
/// an error, and returns them as a new handle. Blocks: call with koffi's async form.
char* arrow_shim_async_consumer_collect(ArrowShimAsyncConsumer* c, ArrowShimBatches** out) {
  *out = nullptr;
  return Guard([&]() -> Status {
    ARROW_ASSIGN_OR_RAISE(auto gen, c->schema_future.result());
    auto h = std::make_unique<ArrowShimBatches>();
    h->schema = gen.schema;
    for (;;) {
      auto future = gen.generator();  // keep it: result() returns a reference into it
      ARROW_ASSIGN_OR_RAISE(auto next, future.result());
      if (arrow::IsIterationEnd(next)) break;
      h->batches.push_back(std::move(next.batch));
    }
    *out = h.release();
    return Status::OK();
  });
}

/// Frees the consumer; releases its handler if no producer did.
void arrow_shim_async_consumer_free(ArrowShimAsyncConsumer* c) {
  if (c->handler.release) c->handler.release(&c->handler);
  delete c;
}

}  // extern "C"
