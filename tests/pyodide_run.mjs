// Run Python code under Pyodide (CPython 3.14 on WebAssembly) in Node, for the tests.
//
//   node tests/pyodide_run.mjs FOLDER < code.py
//
// FOLDER's notebooks (*.ipynb) and module (mha_lists/**.py) are written into Pyodide's
// file system at /work, as the web page writes the module and as a JupyterLite site
// serves both; the code runs there (working directory /work, importable) and whatever
// it prints is this script's output. Exit code 1 if the code raises.
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { loadPyodide } from "pyodide";

const folder = process.argv[2];
const code = readFileSync(0, "utf8");
const pyodide = await loadPyodide({ stdout: () => {}, stderr: (line) => process.stderr.write(line + "\n") });
pyodide.setStdout({ write: (bytes) => { process.stdout.write(bytes); return bytes.length; } });
pyodide.FS.mkdirTree("/work/mha_lists");
for (const name of readdirSync(folder).filter((n) => n.endsWith(".ipynb"))) {
  pyodide.FS.writeFile(`/work/${name}`, readFileSync(join(folder, name), "utf8"));
}
if (existsSync(join(folder, "mha_lists"))) {
  const files = readdirSync(join(folder, "mha_lists"), { recursive: true }).filter((n) => n.endsWith(".py"));
  for (const name of files) {  // "__init__.py", "core/matrix.py", ...
    pyodide.FS.mkdirTree(dirname(`/work/mha_lists/${name}`));
    pyodide.FS.writeFile(`/work/mha_lists/${name}`, readFileSync(join(folder, "mha_lists", name), "utf8"));
  }
}
pyodide.FS.chdir("/work");
try {
  pyodide.runPython("import sys\nsys.path.insert(0, '/work')\n" + code);
} catch (error) {
  process.stderr.write(String(error) + "\n");
  process.exitCode = 1;
}
