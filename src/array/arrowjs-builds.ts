/**
 * The arrow-js builders as target-neutral code reaches them: the device
 * layer (`DeviceArray.toHost`, the device importers' default build), the
 * async reader and the stream of device arrays build arrow-js objects only
 * through what src/array/build.ts hands in here when it loads. Every module
 * that builds arrow-js objects from an import loads build.ts, so these are
 * set wherever an arrow-js object can be asked for; a flechette-only program
 * never loads build.ts (nor apache-arrow), and a request for an arrow-js
 * object there is an `unsupported` error that names the neutral form to use.
 */
import { ArrowDeviceError } from '../errors.js';

/** What src/array/build.ts hands in when it loads. */
export interface ArrowJsBuilds {
  buildData: typeof import('./build.js').buildData;
  buildBatch: typeof import('./build.js').buildBatch;
  batchSchemaOf: typeof import('./plan-arrowjs.js').batchSchemaOf;
}

let builds: ArrowJsBuilds | null = null;

/** Called once by src/array/build.ts at load. */
export function setArrowJsBuilds(b: ArrowJsBuilds): void {
  builds = b;
}

/** The arrow-js builders; `unsupported` at `path` where the arrow-js target is not loaded. */
export function arrowJsBuilds(path: string): ArrowJsBuilds {
  if (builds === null) {
    throw new ArrowDeviceError(
      'unsupported',
      path,
      'arrow-js objects come from the "arrow-device" entry (which needs the apache-arrow package): read ArrayViews ({ view: true }, toHostView()) or use arrow-device/flechette',
    );
  }
  return builds;
}
