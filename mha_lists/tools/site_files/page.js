// The page's only script: load Pyodide, put mha_lists into its file system, and
// recompute every step whenever a setting changes. The settings live in the
// query string, so the address bar is always a link to the example on screen, and
// every change is a step of the browser's history: Back undoes it, Forward redoes it.
// All HTML of the walkthrough comes from Python (mha_lists.tools.site.page_update).

const config = JSON.parse(document.getElementById("mha-config").textContent);
const form = document.getElementById("controls");
const statusLine = document.getElementById("status");
const errorBox = document.getElementById("error");
const walkthrough = document.getElementById("walkthrough");
const command = document.getElementById("command");
const commandLine = document.getElementById("command-line");
const loading = document.getElementById("loading");
const progress = document.getElementById("progress");
const progressText = document.getElementById("progress-text");
const MODULE_DIR = "/mha_lists_site";
const FIELDS = ["sentence", "seed", "heads", "d_model"];

let update = null; // mha_lists.tools.site.page_update, once Python is ready
let pythonVersion = "Python";

function setState(state, message) {
  document.body.dataset.state = state;
  statusLine.textContent = message;
}

function fillForm(settings) {
  for (const name of FIELDS) form[name].value = settings[name];
  form.causal.checked = Boolean(settings.causal);
}

// Put into the form what a query string names, as typed, and leave every other field as it is:
// an example link changes only what it names, and a link Python refuses shows what it asked for.
function fillFormFromQuery(query) {
  const params = new URLSearchParams(query);
  for (const name of FIELDS) {
    if (params.has(name)) form[name].value = params.get(name);
  }
  if (params.has("causal")) form.causal.checked = ["1", "true", "on", "yes"].includes(params.get("causal").toLowerCase());
}

function formQuery() {
  const params = new URLSearchParams();
  params.set("sentence", form.sentence.value.trim().split(/\s+/).join(" "));
  for (const name of ["seed", "heads", "d_model"]) params.set(name, form[name].value);
  params.set("causal", form.causal.checked ? "1" : "0");
  return "?" + params.toString();
}

function show(query) {
  const result = JSON.parse(update(query));
  if (!result.ok) {
    errorBox.textContent = result.error;
    errorBox.hidden = false;
    walkthrough.hidden = true;
    commandLine.hidden = true;
    setState("error", "These settings give no example; change one above, or go Back.");
    return;
  }
  errorBox.hidden = true;
  walkthrough.hidden = false;
  commandLine.hidden = false;
  walkthrough.innerHTML = result.html;
  command.textContent = result.command;
  fillForm(result.settings);
  const s = result.settings;
  setState("computed", `Computed in your browser: ${s.heads} head${s.heads === 1 ? "" : "s"}, d_model ${s.d_model}, seed ${s.seed}` +
    `${s.causal ? ", causal mask" : ""}, by mha_lists on ${pythonVersion}.`);
}

// A change by the learner: a new history entry (unless nothing changed), then the numbers.
function recompute() {
  const query = formQuery();
  if (query !== location.search) history.pushState({ query }, "", query + location.hash);
  show(query);
}

// Back or Forward: the form and the numbers of that entry.
function restore() {
  fillForm(config.defaults);
  fillFormFromQuery(location.search);
  show(location.search);
}

function step(done, total, text) {
  progress.max = total;
  progress.value = done;
  progressText.textContent = `${text} (step ${done + 1} of ${total + 1})`;
}

// Let the browser paint the progress before a step that holds the main thread (Python's import).
const painted = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));

async function loadPython() {
  const total = config.moduleFiles.length + 2;  // Python itself, each module file, the import
  const started = performance.now();
  const seconds = () => ((performance.now() - started) / 1000).toFixed(0);
  loading.hidden = false;
  step(0, total, "Loading Python (Pyodide, about 10 MB; 3-12 s on a first visit)");
  const ticker = setInterval(() => {
    if (progress.value === 0) step(0, total, `Loading Python (Pyodide, about 10 MB): ${seconds()} s so far`);
  }, 1000);
  try {
    const base = new URL(config.pyodideUrl, document.baseURI).href;
    const { loadPyodide } = await import(base + "pyodide.mjs");
    const pyodide = await loadPyodide({ indexURL: base });
    clearInterval(ticker);
    let done = 1;
    for (const name of config.moduleFiles) {  // "core/matrix.py", ...: only what the page imports
      step(done, total, `Loading mha_lists/${name}`);
      pyodide.FS.mkdirTree(`${MODULE_DIR}/mha_lists/${name}`.replace(/\/[^/]*$/, ""));
      const response = await fetch(new URL("mha_lists/" + name, document.baseURI));
      if (!response.ok) throw new Error(`could not load mha_lists/${name} (${response.status})`);
      pyodide.FS.writeFile(`${MODULE_DIR}/mha_lists/${name}`, await response.text());
      done += 1;
    }
    step(done, total, "Importing mha_lists");
    await painted();
    pyodide.runPython(`import sys\nsys.path.insert(0, ${JSON.stringify(MODULE_DIR)})\nimport mha_lists.tools.site`);
    pythonVersion = pyodide.runPython(
      "import sys, platform\n'CPython %d.%d.%d (%s, Pyodide)' % (*sys.version_info[:3], platform.machine())");
    update = pyodide.pyimport("mha_lists.tools.site").page_update;
    step(total, total, `Python ready in ${seconds()} s`);
  } finally {
    clearInterval(ticker);
    loading.hidden = true;
  }
}

function enableControls() {
  for (const element of form.querySelectorAll("input, button")) element.disabled = false;
  form.addEventListener("change", recompute);
  form.addEventListener("submit", (event) => { event.preventDefault(); recompute(); });
  for (const button of form.querySelectorAll("button.word")) {
    button.addEventListener("click", () => {
      form.sentence.value = (form.sentence.value.trim() + " " + button.textContent).trim();
      recompute();
    });
  }
  for (const link of document.querySelectorAll("a.example")) {
    link.addEventListener("click", (event) => {  // recompute in place: no reload, no new Python
      event.preventDefault();
      fillFormFromQuery(new URL(link.href).search);
      recompute();
    });
  }
  document.getElementById("backspace").addEventListener("click", () => {
    form.sentence.value = form.sentence.value.trim().split(/\s+/).slice(0, -1).join(" ");
    recompute();
  });
  window.addEventListener("popstate", restore);
}

async function start() {
  const query = location.search;
  if (query) {
    fillFormFromQuery(query);
    walkthrough.classList.add("stale");  // the default example's numbers, until this link's are computed
    commandLine.classList.add("stale");
  }
  setState("loading", (query ? "Computing the example of this link" : "Showing the default example") +
    "; loading Python (Pyodide) to recompute in your browser...");
  try {
    await loadPython();
  } catch (error) {
    setState("failed", `Python could not be loaded from ${config.pyodideUrl} (${error.message}). ` +
      (query ? "The numbers below are the default example, not this link's." : "The numbers below are the default example."));
    return;
  }
  walkthrough.classList.remove("stale");
  commandLine.classList.remove("stale");
  enableControls();
  show(query);
}

start();
