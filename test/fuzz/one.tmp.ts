import { loadCorpus, makeCase } from './cases.js';
import { runOne } from './runner.js';
const corpus = loadCorpus();
const [seed, idx] = process.argv.slice(2).map(Number);
const c = makeCase(corpus, seed!, idx!);
if (process.argv[4]) c.driver = process.argv[4] as never;
console.log(JSON.stringify(c.mutations), c.driver);
console.log(JSON.stringify(await runOne(c)));
