export * from './layout.js';
export * from './constants.js';
