// The resolve hook of tools/arrow-oldest/hooks.mjs, for module.registerHooks
// (synchronous: `nextResolve` returns the result) and module.register (its
// thread: `nextResolve` returns a promise, which is returned as it is).
//
// Plain JavaScript for Node.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// Resolution as if imported by a file of that folder: its node_modules is searched first.
const parentURL = pathToFileURL(join(process.env.ARROW_DEVICE_APACHE_ARROW ?? '', 'resolve-from.mjs')).href;

export function resolve(specifier, context, nextResolve) {
  if (specifier === 'apache-arrow' || specifier.startsWith('apache-arrow/')) return nextResolve(specifier, { ...context, parentURL });
  return nextResolve(specifier, context);
}
