// Put into JupyterLite's pages by lite/build.py, before the app's own scripts.
//
// When the Python kernel (Pyodide, in a web worker) cannot start, jupyterlite-pyodide-kernel
// writes the reason into the kernel log and turns the kernel icon red: easy to miss, and the
// cells just wait ([*]). This script watches the kernel's worker and, if the worker fails to
// load or its first answer (to "initialize") is an error, shows the reason over the page.
// It does the same when a package the site installs at kernel start (mha_lists among them,
// lite/build.py) could not be installed: Pyodide then starts without it, says why only in the
// kernel's log, and every notebook's import fails.
(function () {
  "use strict";
  const NativeWorker = window.Worker;
  if (!NativeWorker) return;

  // Pyodide's words on stderr (the kernel's log) for a package it could not install; the next
  // line is the error.
  const NOT_INSTALLED = /^The following error occurred while loading (\S+):$/;

  function show(reason, title = "Python could not start here, so the code cells will not run. ") {
    if (document.getElementById("mha-kernel-failed")) return;
    const box = document.createElement("div");
    box.id = "mha-kernel-failed";
    box.setAttribute("role", "alert");
    box.style.cssText = "position:fixed;z-index:100000;left:0;right:0;top:0;padding:0.8em 1.2em;" +
      "background:#fdecea;color:#5f1410;border-bottom:4px solid #b3261e;font:16px/1.4 system-ui,sans-serif";
    const heading = document.createElement("strong");
    heading.textContent = title;
    const why = document.createElement("span");
    why.textContent = "Reason: " + reason + ". Reload the page to try again. If it fails again, this " +
      "copy of the site is missing files, or the browser blocks what the kernel needs (a page " +
      "opened as a file, or a private window): tell whoever set it up.";
    const close = document.createElement("button");
    close.type = "button";
    close.textContent = "Close";
    close.style.cssText = "margin-left:1em;font:inherit";
    close.addEventListener("click", () => box.remove());
    box.append(heading, why, close);
    document.body.append(box);
  }
  window.mhaKernelFailed = show;  // for a test, or another script

  class WatchedWorker extends NativeWorker {
    constructor(url, options) {
      super(url, options);
      let answered = false;
      let notInstalled = null;  // the package whose error is the next line of the log
      this.addEventListener("error", (event) => show(event.message || "the kernel's worker did not load"));
      this.addEventListener("message", (event) => {
        const data = event.data;
        const log = data && data._logMessage;
        if (log && !answered) {  // the kernel's log, while it starts
          const line = String(log.data);
          const failed = NOT_INSTALLED.exec(line);
          if (notInstalled && !failed) {
            show(`${notInstalled} could not be installed (${line})`,
                 `Python started without ${notInstalled}, so the notebooks' code cells will fail. `);
          }
          notInstalled = failed ? failed[1] : null;
          return;
        }
        // comlink's replies carry an id and a type; the first one answers initialize().
        if (answered || !data || data.id === undefined || data.type === undefined) return;
        answered = true;
        if (data.type === "HANDLER" && data.name === "throw" && data.value && data.value.isError) {
          const error = data.value.value || {};
          show(String(error.message || error || "unknown error"));
        }
      });
    }
  }
  window.Worker = WatchedWorker;
})();
