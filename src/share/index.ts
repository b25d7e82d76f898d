/** Arrow data shared between the threads of one process without a copy (docs/threads.md). */
export {
  share, importShared, dropShared, releaseThreadShares,
  type SharedHandle, type SharedTicket, type SharedKind, type SharedImport, type ShareOptions, type SharedImportOptions, type WorkerLike,
} from './share.js';
