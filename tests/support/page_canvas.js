/* Runs the HTML report's script (pva/analysis/html/assets/report.js) in Node against a minimal
 * stand-in for the page, and prints every rectangle it fills on the canvases of one chart kind.
 *
 * Usage: node page_canvas.js report.js data.json CHART REPORTS WIDTH
 * Prints JSON: [{"report": r, "rects": [[x, y, w, h, fillStyle, globalAlpha], ...]}, ...].
 */
"use strict";
const fs = require("fs");
const [script, dataPath, chart, reportCount, width] = process.argv.slice(2);
const data = fs.readFileSync(dataPath, "utf8");

function element(props) {
  return Object.assign({
    dataset: {}, style: {}, classList: { add() {}, remove() {}, toggle() {} },
    appendChild() {}, addEventListener() {}, insertAdjacentElement() {}, querySelector() { return null; },
    querySelectorAll() { return []; }, getBoundingClientRect() { return { left: 0, top: 0, width: 0, height: 0 }; },
  }, props);
}

function canvas(report) {
  const rects = [];
  const ctx = {
    fillStyle: "#000000", strokeStyle: "#000000", globalAlpha: 1, font: "", textAlign: "", textBaseline: "",
    lineWidth: 1,
    setTransform() {}, beginPath() {}, moveTo() {}, lineTo() {}, stroke() {}, fill() {}, closePath() {},
    fillText() {}, save() {}, restore() {}, rect() {}, clip() {}, arc() {}, strokeRect() {},
    setLineDash() {}, measureText(t) { return { width: 6 * String(t).length }; },
    fillRect(x, y, w, h) { rects.push([x, y, w, h, this.fillStyle, this.globalAlpha]); },
  };
  const parent = element({ getBoundingClientRect() { return { left: 0, top: 0, width: Number(width), height: 0 }; } });
  const c = element({ dataset: { chart: chart, report: String(report) }, parentElement: parent, getContext() { return ctx; } });
  c.rects = rects;
  return c;
}

const canvases = [];
for (let r = 0; r < Number(reportCount); r++) canvases.push(canvas(r));
const dataElement = element({ textContent: data });
global.window = { devicePixelRatio: 1, innerWidth: 1200, innerHeight: 800, addEventListener() {} };
global.document = {
  documentElement: element({}),
  body: element({}),
  createElement() { return element({}); },
  getElementById(id) { return id === "pva-data" ? dataElement : null; },
  querySelectorAll(selector) { return selector === 'canvas[data-chart="' + chart + '"]' ? canvases : []; },
};
const errors = [];
console.error = (...args) => errors.push(args.map(String).join(" "));
eval(fs.readFileSync(script, "utf8"));
if (errors.length || document.documentElement.dataset.pvaFailures !== "0") {
  process.stderr.write(errors.join("\n") + "\n");
  process.exit(1);
}
process.stdout.write(JSON.stringify(canvases.map((c, r) => ({ report: r, rects: c.rects }))));
