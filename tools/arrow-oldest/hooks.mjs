// Preloaded (`--import`) in every process of tools/test-arrow-oldest.mjs's
// run: through NODE_OPTIONS in the child processes tests start, on the
// command line (which a Worker inherits as execArgv) in the test processes.
// It resolves `apache-arrow` and its subpaths, from any importer (the tests,
// src/, dist/, other packages), in the folder named by
// ARROW_DEVICE_APACHE_ARROW instead of the repository's node_modules, which
// is never touched.
//
// module.registerHooks (Node 22.15 and later): synchronous hooks on this
// thread, which also cover `require`. Older Nodes (a test that proves the
// package refuses Node 20 runs one) get module.register's hooks, which run
// on a thread of their own and cover `import`.
//
// Plain JavaScript for Node.
import * as nodeModule from 'node:module';

if (!process.env.ARROW_DEVICE_APACHE_ARROW) throw new Error('tools/arrow-oldest/hooks.mjs: ARROW_DEVICE_APACHE_ARROW names no folder');
if (typeof nodeModule.registerHooks === 'function') {
  const { resolve } = await import('./resolve.mjs');
  nodeModule.registerHooks({ resolve });
} else {
  nodeModule.register('./resolve.mjs', import.meta.url);
}
