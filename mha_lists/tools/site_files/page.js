// The page's only script: load Pyodide, put mha_lists into its file system, and
// recompute every step whenever a setting changes. The settings live in the
// query string, so the address bar is always a link to the example on screen.
// All HTML of the walkthrough comes from Python (mha_lists.site.page_update).

const config = JSON.parse(document.getElementById("mha-config").textContent);
const form = document.getElementById("controls");
const statusLine = document.getElementById("status");
const errorBox = document.getElementById("error");
const walkthrough = document.getElementById("walkthrough");
const command = document.getElementById("command");
const commandLine = document.getElementById("command-line");
const MODULE_DIR = "/mha_lists_site";

let update = null; // mha_lists.site.page_update, once Python is ready

function setState(state, message) {
  document.body.dataset.state = state;
  statusLine.textContent = message;
}

function fillForm(settings) {
  form.sentence.value = settings.sentence;
  form.seed.value = settings.seed;
  form.heads.value = settings.heads;
  form.d_model.value = settings.d_model;
  form.causal.checked = Boolean(settings.causal);
}

// The form as given in the query string, even where Python will refuse it,
// so a teacher sees what the link asked for next to the error.
function fillFormFromQuery(query) {
  const params = new URLSearchParams(query);
  for (const name of ["sentence", "seed", "heads", "d_model"]) {
    if (params.has(name)) form[name].value = params.get(name);
  }
  if (params.has("causal")) form.causal.checked = ["1", "true", "on", "yes"].includes(params.get("causal").toLowerCase());
}

function formQuery() {
  const params = new URLSearchParams();
  params.set("sentence", form.sentence.value.trim().split(/\s+/).join(" "));
  params.set("seed", form.seed.value);
  params.set("heads", form.heads.value);
  params.set("d_model", form.d_model.value);
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
    setState("error", "These settings give no example; change one above.");
    return;
  }
  errorBox.hidden = true;
  walkthrough.hidden = false;
  commandLine.hidden = false;
  walkthrough.innerHTML = result.html;
  command.textContent = result.command;
  fillForm(result.settings);
  const s = result.settings;
  setState("computed", `Computed in your browser: ${s.heads} heads, d_model ${s.d_model}, seed ${s.seed}` +
    `${s.causal ? ", causal mask" : ""}, by mha_lists on ${pythonVersion}.`);
}

let pythonVersion = "Python";

function recompute() {
  const query = formQuery();
  history.replaceState(null, "", query + location.hash);
  show(query);
}

async function loadPython() {
  const base = new URL(config.pyodideUrl, document.baseURI).href;
  const { loadPyodide } = await import(base + "pyodide.mjs");
  const pyodide = await loadPyodide({ indexURL: base });
  for (const name of config.moduleFiles) {  // "core/matrix.py", ...
    pyodide.FS.mkdirTree(`${MODULE_DIR}/mha_lists/${name}`.replace(/\/[^/]*$/, ""));
    const response = await fetch(new URL("mha_lists/" + name, document.baseURI));
    if (!response.ok) throw new Error(`could not load mha_lists/${name} (${response.status})`);
    pyodide.FS.writeFile(`${MODULE_DIR}/mha_lists/${name}`, await response.text());
  }
  pyodide.runPython(`import sys\nsys.path.insert(0, ${JSON.stringify(MODULE_DIR)})\nimport mha_lists.tools.site`);
  pythonVersion = pyodide.runPython(
    "import sys, platform\n'CPython %d.%d.%d (%s, Pyodide)' % (*sys.version_info[:3], platform.machine())");
  update = pyodide.pyimport("mha_lists.tools.site").page_update;
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
      fillForm(config.defaults);
      fillFormFromQuery(new URL(link.href).search);
      recompute();
    });
  }
  document.getElementById("backspace").addEventListener("click", () => {
    form.sentence.value = form.sentence.value.trim().split(/\s+/).slice(0, -1).join(" ");
    recompute();
  });
}

async function start() {
  const query = location.search;
  if (query) {
    fillFormFromQuery(query);
    walkthrough.classList.add("stale");
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
  enableControls();
  show(query);
}

start();
