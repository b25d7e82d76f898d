/*
 * The part of the CUDA runtime API (cuda_runtime.h) that the simulated
 * runtime (simcudart.c) implements, declared here from NVIDIA's published
 * API reference (names, signatures, numeric values), plus the simulator's
 * own extensions (sim_*). The C test peer (peer.c) compiles against this
 * header instead of the CUDA toolkit's.
 */
#ifndef ARROW_DEVICE_SIM_CUDA_RUNTIME_H
#define ARROW_DEVICE_SIM_CUDA_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cudaError_t: the real numeric values, so messages and codes match a real runtime. */
typedef int cudaError_t;
#define cudaSuccess 0
#define cudaErrorInvalidValue 1
#define cudaErrorMemoryAllocation 2
#define cudaErrorInvalidMemcpyDirection 21
#define cudaErrorNoDevice 100
#define cudaErrorInvalidDevice 101
#define cudaErrorInvalidResourceHandle 400
#define cudaErrorNotReady 600

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef void (*cudaHostFn_t)(void* user_data);

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

#define cudaStreamDefault 0
#define cudaStreamNonBlocking 1
#define cudaEventDefault 0
#define cudaEventDisableTiming 2
#define cudaMemAttachGlobal 1

cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void** dev_ptr, size_t size);
cudaError_t cudaFree(void* dev_ptr);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMallocManaged(void** dev_ptr, size_t size, unsigned int flags);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemset(void* dev_ptr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* dev_ptr, int value, size_t count, cudaStream_t stream);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventDestroy(cudaEvent_t event);

/* --- simulator extensions ------------------------------------------------------------ */

/*
 * A "kernel": fn(args) runs on the stream's worker, in stream order, like
 * cudaLaunchHostFunc; unlike a host function it may read and write device
 * memory through sim_device_view.
 */
cudaError_t sim_launch_kernel(cudaStream_t stream, cudaHostFn_t fn, void* args);
/*
 * Inside a kernel only (aborts elsewhere: the host cannot touch device
 * memory): the address at which the kernel reads and writes `ptr`. Device
 * pointers map to the simulator's private view; host-readable pointers map
 * to themselves; NULL stays NULL.
 */
void* sim_device_view(const void* ptr);

/* Live objects, for leak checks: allocations of every kind, streams, events; ops queued and not yet run. */
int64_t sim_live_allocations(void);
int64_t sim_live_streams(void);
int64_t sim_live_events(void);
int64_t sim_pending_ops(void);
/* Ops (copies, memsets, event records, waits, kernels) run since load. */
int64_t sim_completed_ops(void);
/* How long each queued op waits before it runs (microseconds); returns the previous value. */
int64_t sim_set_delay_us(int64_t us);
/* "simcudart": tells the simulator from a real runtime. */
const char* sim_name(void);

#ifdef __cplusplus
}
#endif

#endif
