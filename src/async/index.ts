export { AsyncDeviceStreamReader, AsyncStreamError, createAsyncDeviceStreamReader, type AsyncConsumerOptions, type AsyncTaskResult } from './consumer.js';
export { produceAsyncDeviceStream, type AsyncBatchSource, type AsyncProducerOptions, type AsyncProduceResult } from './producer.js';
