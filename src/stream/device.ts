/**
 * Device streams: `importDeviceArrayStream` and `exportDeviceArrayStream`
 * made public here, with the device layer handed to the stream code first.
 * src/stream/import.ts and export.ts run plain streams without loading
 * src/device/ (what `arrow-device/adbc` reads); the device parts of a
 * stream reach that layer through what this module gives them when it
 * loads, so whoever can name a device stream function has loaded it.
 * Target-neutral (the device layer's neutral import, src/device/import.ts):
 * a flechette reader of a device stream loads no apache-arrow.
 */
import { readsAsync } from '../device/backend.js';
import { DeviceArray } from '../device/device-array.js';
import { writeDeviceFields } from '../device/export.js';
import { importDeviceArrayLater, importDeviceWith, readDeviceFields, settleDeviceWith } from '../device/import.js';
import { setDeviceStreamExports } from './export.js';
import { setDeviceStreamImports } from './import.js';

setDeviceStreamImports({ DeviceArray, readsAsync, importDeviceArrayLater, importDeviceWith, readDeviceFields, settleDeviceWith });
setDeviceStreamExports({ DeviceArray, writeDeviceFields });

export { importDeviceArrayStream } from './import.js';
export { exportDeviceArrayStream } from './export.js';
