// The page's only script: load Pyodide, put mha_lists into its file system, and
// recompute every step whenever a setting changes. The settings live in the
// query string, so the address bar is always a link to the example on screen, and
// every change is a step of the browser's history: Back undoes it, Forward redoes it.
// All HTML of the walkthrough comes from Python (mha_lists.tools.site.page_update).
// Trained mode (?trained=1) reads the shipped run, fetched the first time it is asked for.
// Example links and Back/Forward work while Python loads: the form and the address bar change at
// once, and the numbers of the example on the address bar come when Python is ready.

const config = JSON.parse(document.getElementById("mha-config").textContent);
const form = document.getElementById("controls");
const statusLine = document.getElementById("status");
const errorBox = document.getElementById("error");
const walkthrough = document.getElementById("walkthrough");
const command = document.getElementById("command");
const commandIntro = document.getElementById("command-intro");
const commandLine = document.getElementById("command-line");
const loading = document.getElementById("loading");
const progress = document.getElementById("progress");
const progressText = document.getElementById("progress-text");
const MODULE_DIR = "/mha_lists_site";
const FIELDS = ["sentence", "seed", "heads", "d_model"];
const RANDOM_ONLY = ["seed", "heads", "d_model", "causal"];  // the trained model has its own (the note says so)
const CHECKED = ["trained", "sentence", "seed", "heads", "d_model", "causal"];  // each has a message beside it
const TRUE = ["1", "true", "on", "yes"];

let update = null; // mha_lists.tools.site.page_update, once Python is ready
let pyodide = null;
let trainedFiles = null;  // a promise: the shipped run written into Pyodide's file system
let shown = 0;  // the latest show(); an earlier one still waiting for the weights draws nothing
let pythonVersion = "Python";
let pythonFailed = false;  // then an example link is followed as a plain link: loading the page again may work
// Each mode keeps its own sentence: the vocabulary's words, or any text of at most config.trained.window characters.
const sentences = { random: config.defaults.sentence, trained: config.trained.sentence };
let sentenceMode = "random";  // whose sentence the box holds

function setState(state, message) {
  document.body.dataset.state = state;
  statusLine.textContent = message;
}

const trainedMode = () => form.trained.value === "1";
const isTrained = (query) => TRUE.includes((new URLSearchParams(query).get("trained") || "").trim().toLowerCase());

// The mode's controls: in trained mode the random weights' settings are off (the note says why) and the
// word buttons are hidden (any text is read). The sentence box swaps to the other mode's sentence.
function setMode(trained) {
  const mode = trained ? "trained" : "random";
  form.trained.value = trained ? "1" : "0";
  document.body.dataset.mode = mode;
  if (mode !== sentenceMode) {
    sentences[sentenceMode] = form.sentence.value;
    form.sentence.value = sentences[mode];
    sentenceMode = mode;
  }
  if (!update) return;  // before Python is ready every control is off anyway
  for (const name of RANDOM_ONLY) form[name].disabled = trained;
  for (const button of form.querySelectorAll(".words button")) button.disabled = trained;
}

function fillForm(settings) {
  setMode(settings.trained);
  form.sentence.value = settings.sentence;
  if (settings.trained) return;  // the random weights' settings stay as they were, for switching back
  for (const name of FIELDS) form[name].value = settings[name];
  form.causal.checked = Boolean(settings.causal);
}

// Put into the form what a query string names, as typed, and leave every other field as it is:
// an example link changes only what it names, and a link Python refuses shows what it asked for.
function fillFormFromQuery(query) {
  const params = new URLSearchParams(query);
  if (params.has("trained")) setMode(isTrained(query));
  for (const name of FIELDS) {
    if (params.has(name)) form[name].value = params.get(name);
  }
  if (params.has("causal")) form.causal.checked = TRUE.includes(params.get("causal").toLowerCase());
}

function formQuery() {
  if (trainedMode()) {  // the text as typed: spaces are characters too
    return "?" + new URLSearchParams({ trained: "1", sentence: form.sentence.value }).toString();
  }
  const params = new URLSearchParams();
  params.set("sentence", form.sentence.value.trim().split(/\s+/).join(" "));
  for (const name of ["seed", "heads", "d_model"]) params.set(name, form[name].value);
  params.set("causal", form.causal.checked ? "1" : "0");
  return "?" + params.toString();
}

// Each field Python refuses gets its message beside it, is marked invalid, and is described by the message.
function markFields(errors) {
  for (const name of CHECKED) {
    const note = document.getElementById(`${name}-error`);
    const message = errors[name] || "";
    note.textContent = message;
    note.hidden = !message;
    const inputs = name === "trained" ? [...form.querySelectorAll("input[name='trained']")] : [form[name]];
    for (const input of inputs) {
      input.dataset.describedby ??= input.getAttribute("aria-describedby") || "";
      const ids = [...(message ? [note.id] : []), ...input.dataset.describedby.split(" ").filter(Boolean)];
      if (message) input.setAttribute("aria-invalid", "true");
      else input.removeAttribute("aria-invalid");
      if (ids.length) input.setAttribute("aria-describedby", ids.join(" "));
      else input.removeAttribute("aria-describedby");
    }
  }
}

function showError(message, state, errors = {}) {
  markFields(errors);
  errorBox.textContent = message;
  errorBox.hidden = false;
  walkthrough.hidden = true;
  commandLine.hidden = true;
  const n = Object.keys(errors).length;
  const which = n === 1 ? "the field marked above needs" : `the ${n} fields marked above need`;
  setState(state, n ? `These settings give no example: ${which} a change (or go Back).`
    : "These settings give no example; change one above, or go Back.");
}

// The shipped run, into Pyodide's file system where reading.trained_model() looks: once, on first use.
function loadTrainedFiles() {
  trainedFiles ??= (async () => {
    for (const name of config.trained.files) {  // "data/read_text_run.json"
      const response = await fetch(new URL("mha_lists/" + name, document.baseURI));
      if (!response.ok) throw new Error(`could not load mha_lists/${name} (${response.status})`);
      const bytes = new Uint8Array(await response.arrayBuffer());
      pyodide.FS.mkdirTree(`${MODULE_DIR}/mha_lists/${name}`.replace(/\/[^/]*$/, ""));
      pyodide.FS.writeFile(`${MODULE_DIR}/mha_lists/${name}`, bytes);
    }
  })();
  trainedFiles.catch(() => { trainedFiles = null; });  // a later change tries again
  return trainedFiles;
}

// A table wider than its box scrolls sideways; say so under it (and not under one that fits), and fade
// its right edge until it is scrolled to the end.
function markScrolling() {
  for (const box of walkthrough.querySelectorAll("figure .scroll")) {
    const figure = box.closest("figure");
    const atEnd = () => figure.toggleAttribute("data-at-end", box.scrollLeft + box.clientWidth >= box.scrollWidth - 1);
    figure.toggleAttribute("data-scrolls", box.scrollWidth > box.clientWidth + 1);
    atEnd();
    box.onscroll = atEnd;
  }
}

// A score, weight or head-output entry explains itself (site.explanations): its title shows on hover, and
// the line under its table shows the same text while it is pointed at, focused (Tab) or tapped.
function explainEntry(event) {
  const entry = event.target.closest ? event.target.closest("figure a[title]") : null;
  const said = entry && entry.closest("figure").querySelector(".said");
  if (!said) return;
  const before = walkthrough.querySelector("a.pointed");
  if (before) before.classList.remove("pointed");
  entry.classList.add("pointed");
  said.textContent = entry.title;
}

// Before Python is ready: the numbers on screen are the default example's, until this one is computed.
function waitForPython(query) {
  walkthrough.classList.toggle("stale", Boolean(query));
  commandLine.classList.toggle("stale", Boolean(query));
  setState("loading", (query ? "This example is computed as soon as Python has loaded; the numbers below are " +
    "still the default example's" : "Showing the default example") + ". Loading Python (Pyodide)...");
}

async function show(query) {
  const ticket = ++shown;
  if (!update) {  // start() shows the address bar's example once Python is ready
    if (!pythonFailed) waitForPython(query);
    return;
  }
  if (isTrained(query)) {
    try {
      if (!trainedFiles) setState("loading", `Loading the trained model's weights (mha_lists/${config.trained.files.join(", ")})...`);
      await loadTrainedFiles();
    } catch (error) {
      if (ticket === shown) showError(`The trained model's weights could not be loaded: ${error.message}`, "failed");
      return;
    }
    if (ticket !== shown) return;  // a later change is on its way
  }
  const result = JSON.parse(update(query));
  if (!result.ok) {
    showError(result.error, "error", result.errors);
    return;
  }
  markFields({});
  errorBox.hidden = true;
  walkthrough.hidden = false;
  commandLine.hidden = false;
  walkthrough.innerHTML = result.html;
  commandIntro.textContent = result.command_intro;
  command.textContent = result.command;
  fillForm(result.settings);
  markScrolling();
  const s = result.settings;
  if (s.trained) {
    const t = config.trained, n = [...s.sentence].length;  // characters as Python counts them: code points
    setState("computed", `Computed in your browser: the model trained on Genesis (${t.layers}, ` +
      `d_model ${t.d_model}) reading ${n} character${n === 1 ? "" : "s"}, by mha_lists on ${pythonVersion}.`);
    return;
  }
  setState("computed", `Computed in your browser: ${s.heads} head${s.heads === 1 ? "" : "s"}, d_model ${s.d_model}, seed ${s.seed}` +
    `${s.causal ? ", causal mask" : ""}, by mha_lists on ${pythonVersion}.`);
}

// A change by the learner: a new history entry (unless nothing changed), then the numbers.
function recompute() {
  const query = formQuery();
  if (query !== location.search) history.pushState({ query }, "", query + location.hash);
  return show(query);
}

// Back or Forward: the form and the numbers of that entry.
function restore() {
  fillForm(config.defaults);
  fillFormFromQuery(location.search);
  return show(location.search);
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
    pyodide = await loadPyodide({ indexURL: base });
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
  setMode(trainedMode());
  form.addEventListener("change", (event) => {
    if (event.target.name === "trained") setMode(trainedMode());  // first the other mode's sentence and controls
    recompute();
  });
  form.addEventListener("submit", (event) => { event.preventDefault(); recompute(); });
  for (const button of form.querySelectorAll("button.word")) {
    button.addEventListener("click", () => {
      form.sentence.value = (form.sentence.value.trim() + " " + button.textContent).trim();
      recompute();
    });
  }
  document.getElementById("backspace").addEventListener("click", () => {
    form.sentence.value = form.sentence.value.trim().split(/\s+/).slice(0, -1).join(" ");
    recompute();
  });
}

// From the first moment, even while Python loads: an example link changes the form and the address bar
// in place (no reload, no new Python), and Back and Forward step through those changes.
function listenFromTheStart() {
  for (const link of document.querySelectorAll("a.example")) {
    link.addEventListener("click", (event) => {
      if (pythonFailed) return;
      event.preventDefault();
      fillFormFromQuery(new URL(link.href).search);
      recompute();
    });
  }
  window.addEventListener("popstate", restore);
  window.addEventListener("resize", markScrolling);
  walkthrough.addEventListener("focusin", explainEntry);
  walkthrough.addEventListener("mouseover", explainEntry);
  walkthrough.addEventListener("toggle", markScrolling, true);  // a table folded in <details> is measured when opened
}

async function start() {
  if (location.search) fillFormFromQuery(location.search);
  listenFromTheStart();
  markScrolling();
  show(location.search);  // Python is not ready yet: this says so, and keeps the link's settings in the form
  try {
    await loadPython();
  } catch (error) {
    pythonFailed = true;
    setState("failed", `Python could not be loaded from ${config.pyodideUrl} (${error.message}). ` +
      (location.search ? "The numbers below are the default example, not this link's." : "The numbers below are the default example."));
    return;
  }
  walkthrough.classList.remove("stale");
  commandLine.classList.remove("stale");
  enableControls();
  show(location.search);  // the address bar's example: a link clicked while Python loaded is on it
}

start();
