/* pva HTML report: draws the charts, sorts the tables and unfolds the program tree from the JSON
 * inlined in the page. Plain canvas drawing, no libraries, no network access.
 *
 * Every chart is a <canvas data-chart="..." data-report="N">; once drawn it carries
 * data-drawn="1" and data-marks (how many bars, areas or segments it drew). When everything has
 * been set up the <html> element gets data-pva-ready="1" and data-pva-failures (charts that
 * failed; each failure is also reported with console.error). data-draw-ms is the last drawing time.
 */
(function () {
  "use strict";

  const root = document.documentElement;
  const nf = new Intl.NumberFormat("en-US");
  const charts = [];
  let failures = 0;
  let PAGE = null;

  // -- formatting -------------------------------------------------------------------------

  function fmtInt(v) { return nf.format(Math.round(v)); }

  /** A size as pva prints it everywhere (pva.format_size): "512 B", "81.3 kB" (units of 1024). */
  function fmtBytes(v) {
    const units = ["B", "kB", "MB", "GB", "TB"];
    let x = v, i = 0;
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return i === 0 ? Math.trunc(x).toLocaleString("en-US") + " B"
      : x.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 }) + " " + units[i];
  }

  function fmtShort(v) {
    const a = Math.abs(v);
    const cut = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
    for (const [size, suffix] of cut) {
      if (a >= size) {
        const x = v / size;
        const text = Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
        return text.replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "") + suffix;
      }
    }
    return String(Math.round(v * 100) / 100);
  }

  function niceStep(range, count) {
    const raw = range / Math.max(1, count);
    if (!(raw > 0)) return 1;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const n = raw / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
  }

  /** Tick values for a byte axis: steps of 1, 2 or 5 times a power of 1024 times a power of 10. */
  function byteTicks(max, count) {
    let unit = 1;
    while (max / unit >= 1024 * 4 && unit < Math.pow(1024, 4)) unit *= 1024;
    const step = niceStep(max / unit, count) * unit;
    const ticks = [];
    for (let v = 0; v <= max * 1.0001; v += step) ticks.push(v);
    return ticks;
  }

  function valueTicks(lo, hi, count, integer) {
    const step = integer ? Math.max(1, niceStep(hi - lo, count)) : niceStep(hi - lo, count);
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) ticks.push(v);
    return ticks;
  }

  function esc(text) {
    return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }

  // -- canvas and tooltip -----------------------------------------------------------------

  function prepare(canvas) {
    const height = Number(canvas.dataset.height) || 240;
    const parent = canvas.parentElement;
    const width = Math.max(260, Math.floor(parent.getBoundingClientRect().width) - 2);
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, width, height);
    ctx.font = "11px system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif";
    ctx.textBaseline = "middle";
    return { ctx: ctx, width: width, height: height };
  }

  const tip = document.createElement("div");
  tip.id = "pva-tip";
  document.body.appendChild(tip);

  function showTip(ev, text) {
    if (!text) { hideTip(); return; }
    tip.textContent = text;
    tip.style.display = "block";
    const pad = 14;
    let x = ev.clientX + pad, y = ev.clientY + pad;
    const r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 4) x = Math.max(4, ev.clientX - r.width - pad);
    if (y + r.height > window.innerHeight - 4) y = Math.max(4, ev.clientY - r.height - pad);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }

  function hideTip() { tip.style.display = "none"; }

  function localX(canvas, ev) { return ev.clientX - canvas.getBoundingClientRect().left; }
  function localY(canvas, ev) { return ev.clientY - canvas.getBoundingClientRect().top; }

  function yGrid(ctx, box, max, ticks, label) {
    ctx.strokeStyle = "#e6e9ed";
    ctx.fillStyle = "#57606a";
    ctx.lineWidth = 1;
    ctx.textAlign = "right";
    for (const v of ticks) {
      const y = Math.round(box.y + box.h - (v / max) * box.h) + 0.5;
      ctx.beginPath(); ctx.moveTo(box.x, y); ctx.lineTo(box.x + box.w, y); ctx.stroke();
      ctx.fillText(label(v), box.x - 5, y);
    }
    ctx.strokeStyle = "#8c959f";
    ctx.beginPath();
    ctx.moveTo(box.x + 0.5, box.y); ctx.lineTo(box.x + 0.5, box.y + box.h + 0.5);
    ctx.lineTo(box.x + box.w, box.y + box.h + 0.5); ctx.stroke();
  }

  function xLabels(ctx, box, lo, hi, count, label) {
    ctx.fillStyle = "#57606a";
    ctx.textAlign = "center";
    for (const v of valueTicks(lo, hi, count, true)) {
      const x = box.x + ((v - lo) / Math.max(1e-9, hi - lo)) * box.w;
      ctx.fillRect(Math.round(x), box.y + box.h, 1, 4);
      ctx.fillText(label(v), x, box.y + box.h + 12);
    }
  }

  function register(canvas, draw) {
    const chart = { canvas: canvas, draw: draw };
    charts.push(chart);
    safeDraw(chart);
  }

  function safeDraw(chart) {
    try {
      const started = performance.now();
      chart.draw();
      chart.canvas.dataset.drawMs = (performance.now() - started).toFixed(1);
      chart.canvas.dataset.drawn = "1";
    } catch (err) {
      failures++;
      chart.canvas.dataset.drawn = "0";
      console.error("pva: the " + chart.canvas.dataset.chart + " chart could not be drawn:", err);
      const p = document.createElement("p");
      p.className = "chart-error";
      p.textContent = "This chart could not be drawn: " + err;
      chart.canvas.insertAdjacentElement("afterend", p);
    }
  }

  // -- memory per tile ----------------------------------------------------------------------

  let memoryScale = null;
  let memoryGaps = "excluding";

  /** The memory chart's top for the scale and gaps chosen. */
  function memoryTop(scales) {
    if (memoryScale !== "data") return scales.memory_max;
    return memoryGaps === "including" ? scales.memory_data_max : scales.memory_data_max_excluding;
  }

  function memoryChart(canvas, mem, ipu, scales) {
    const nb = ipu.max.length;
    let geometry = null;
    function draw() {
      const { ctx, width, height } = prepare(canvas);
      const box = { x: 70, y: 14, w: width - 82, h: height - 14 - 40 };
      const top = memoryTop(scales);
      const gaps = memoryGaps === "including";
      const maxima = gaps ? ipu.max : ipu.max_excluding;
      canvas.dataset.scale = memoryScale;
      canvas.dataset.gaps = memoryGaps;
      const y = (v) => box.y + box.h - (v / top) * box.h;
      yGrid(ctx, box, top, byteTicks(top, 5), fmtBytes);
      const bw = box.w / nb;
      let marks = 0;
      for (let b = 0; b < nb; b++) {
        let acc = 0;
        const x0 = Math.floor(box.x + b * bw);
        const w = Math.max(1, Math.floor(box.x + (b + 1) * bw) - x0 - (bw > 3 ? 1 : 0));
        for (let s = 0; s < ipu.series.length; s++) {
          if (s === mem.gaps && !gaps) continue;
          const v = ipu.series[s][b];
          if (!(v > 0)) continue;
          const y0 = y(acc + v), y1 = y(acc);
          ctx.fillStyle = mem.colours[s];
          ctx.fillRect(x0, y0, w, Math.max(y1 - y0, 0.5));
          acc += v;
          marks++;
        }
      }
      if (mem.bucket > 1) {
        ctx.fillStyle = "#24292f";
        for (let b = 0; b < nb; b++) ctx.fillRect(box.x + b * bw, Math.round(y(maxima[b])), Math.max(bw, 1), 1);
        marks++;
      }
      ctx.fillStyle = "#d62728";
      ctx.textAlign = "right";
      if (mem.limit <= top) {
        const ly = Math.round(y(mem.limit)) + 0.5;
        ctx.strokeStyle = "#d62728";
        ctx.lineWidth = 1.5;
        ctx.setLineDash([6, 4]);
        ctx.beginPath(); ctx.moveTo(box.x, ly); ctx.lineTo(box.x + box.w, ly); ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillText("tile limit " + fmtBytes(mem.limit), box.x + box.w - 4, ly - 8);
      } else {
        ctx.fillText("\u2191 tile limit " + fmtBytes(mem.limit) + " is above this scale", box.x + box.w - 4, 7);
      }
      let oomMarks = 0;
      for (let b = 0; b < nb; b++) {
        if (!(ipu.oom[b] > 0)) continue;
        const cx = box.x + (b + 0.5) * bw;
        ctx.fillStyle = "#d62728";
        ctx.beginPath();
        ctx.moveTo(cx, box.y + box.h + 2); ctx.lineTo(cx - 4, box.y + box.h + 9); ctx.lineTo(cx + 4, box.y + box.h + 9);
        ctx.closePath(); ctx.fill();
        ctx.fillRect(box.x + b * bw, Math.max(box.y, y(maxima[b]) - 1), Math.max(bw, 1), 2);
        oomMarks++;
      }
      const first = ipu.first_tile, count = mem.tiles_per_ipu;
      const labelBox = { x: box.x, y: box.y + 10, w: box.w, h: box.h };
      xLabels(ctx, labelBox, first, first + count, Math.max(2, Math.floor(box.w / 90)), fmtInt);
      ctx.fillStyle = "#57606a";
      ctx.textAlign = "center";
      ctx.fillText("tile", box.x + box.w / 2, height - 6);
      canvas.dataset.marks = String(marks);
      canvas.dataset.oomMarks = String(oomMarks);
      geometry = { box: box, bw: bw };
    }
    canvas.addEventListener("mousemove", (ev) => {
      if (!geometry) return;
      const b = Math.floor((localX(canvas, ev) - geometry.box.x) / geometry.bw);
      if (b < 0 || b >= nb) { hideTip(); return; }
      const lo = ipu.first_tile + b * mem.bucket;
      const hi = Math.min(ipu.first_tile + mem.tiles_per_ipu, lo + mem.bucket) - 1;
      const lines = [(lo === hi ? "Tile " + lo : "Tiles " + lo + "\u2013" + hi + " (mean per tile)") + ", IPU " + ipu.ipu];
      let sum = 0;
      for (let s = ipu.series.length - 1; s >= 0; s--) {
        if (s === mem.gaps && memoryGaps !== "including") continue;
        const v = ipu.series[s][b];
        sum += v;
        if (v > 0) lines.push(mem.names[s] + ": " + fmtInt(v) + " B");
      }
      lines.push("total: " + fmtInt(sum) + " B");
      if (mem.bucket > 1) {
        const incl = memoryGaps === "including";
        lines.push("largest: tile " + (incl ? ipu.max_tile[b] : ipu.max_tile_excluding[b]) + ", "
          + fmtInt(incl ? ipu.max[b] : ipu.max_excluding[b]) + " B");
      }
      if (ipu.oom[b] > 0) lines.push(ipu.oom[b] + " tile(s) out of memory");
      showTip(ev, lines.join("\n"));
    });
    canvas.addEventListener("mouseleave", hideTip);
    register(canvas, draw);
  }

  // -- liveness -----------------------------------------------------------------------------

  let livenessMode = "total";

  function livenessChart(canvas, live, scales) {
    const values = live.not_always_live;
    const n = values.length;
    let geometry = null;
    function draw() {
      const { ctx, width, height } = prepare(canvas);
      const box = { x: 70, y: 16, w: width - 82, h: height - 16 - 34 };
      const both = livenessMode !== "not-always-live";
      const yMax = both ? scales.liveness_max : scales.liveness_nal_max;
      canvas.dataset.mode = livenessMode;
      const y = (v) => box.y + box.h - (v / yMax) * box.h;
      yGrid(ctx, box, yMax, byteTicks(yMax, 5), fmtBytes);
      const bw = box.w / n;
      const base = both ? live.always_live : 0;
      if (both) {
        ctx.fillStyle = live.colours.always_live;
        ctx.globalAlpha = 0.75;
        ctx.fillRect(box.x + 1, y(base), box.w - 1, box.y + box.h - y(base));
        ctx.globalAlpha = 1;
      }
      ctx.fillStyle = live.colours.not_always_live;
      ctx.beginPath();
      ctx.moveTo(box.x + 1, y(base));
      for (let b = 0; b < n; b++) {
        const yy = y(base + values[b]);
        ctx.lineTo(box.x + b * bw + (b === 0 ? 1 : 0), yy);
        ctx.lineTo(box.x + (b + 1) * bw, yy);
      }
      ctx.lineTo(box.x + box.w, y(base));
      ctx.closePath();
      ctx.fill();
      const peak = live.peak;
      const px = box.x + (Math.floor(peak.index / live.bucket) + 0.5) * bw;
      const py = y(both ? peak.total : peak.not_always_live);
      ctx.strokeStyle = "#d62728";
      ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(px, box.y + box.h); ctx.lineTo(px, py); ctx.stroke();
      ctx.fillStyle = "#d62728";
      ctx.beginPath(); ctx.arc(px, py, 4, 0, 2 * Math.PI); ctx.fill();
      ctx.textAlign = px > box.x + box.w * 0.6 ? "right" : "left";
      ctx.fillText("peak: step " + peak.step + ", " + fmtBytes(both ? peak.total : peak.not_always_live),
                   px + (ctx.textAlign === "left" ? 7 : -7),
                   Math.max(box.y + 4, py - 8));
      const first = live.first_step;
      xLabels(ctx, box, first, first + live.steps, Math.max(2, Math.floor(box.w / 90)), fmtInt);
      ctx.fillStyle = "#57606a";
      ctx.textAlign = "center";
      ctx.fillText("liveness step", box.x + box.w / 2, height - 6);
      canvas.dataset.marks = String(n + 2);
      geometry = { box: box, bw: bw };
    }
    canvas.addEventListener("mousemove", (ev) => {
      if (!geometry) return;
      const b = Math.floor((localX(canvas, ev) - geometry.box.x) / geometry.bw);
      if (b < 0 || b >= n) { hideTip(); return; }
      const lo = live.first_step + b * live.bucket;
      const hi = Math.min(live.first_step + live.steps, lo + live.bucket) - 1;
      const head = lo === hi ? "Step " + lo : "Steps " + lo + "\u2013" + hi + " (largest)";
      showTip(ev, head + "\nnot always live: " + fmtInt(values[b]) + " B\nalways live: " + fmtInt(live.always_live) +
              " B\ntotal: " + fmtInt(live.always_live + values[b]) + " B");
    });
    canvas.addEventListener("mouseleave", hideTip);
    register(canvas, draw);
  }

  // -- execution timeline -----------------------------------------------------------------

  function decodeLane(lane) {
    const n = lane.dur.length;
    const start = new Float64Array(n), step = new Float64Array(n);
    let s = 0, k = 0, maxDur = 0;
    for (let i = 0; i < n; i++) {
      s += lane.start[i]; start[i] = s;
      k += lane.step[i]; step[i] = k;
      if (lane.dur[i] > maxDur) maxDur = lane.dur[i];
    }
    return { start: start, dur: lane.dur, kind: lane.kind, step: step, count: lane.count || null, maxDur: maxDur };
  }

  // Each IPU has two lanes of segments that never overlap (pva.analysis.timeline): its path, where each
  // cycle belongs to one step, and below it, lighter, the steps running beside the path's.
  function decodeTimeline(tl) {
    return tl.ipus.map((row) => {
      const path = decodeLane(row);
      path.ipu = row.ipu; path.steps = row.steps;
      path.overlapped = decodeLane(row.overlapped);
      path.overlapped.ipu = row.ipu;
      return path;
    });
  }

  function lowerBound(arr, value) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid] < value) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function timelineChart(canvas, tl, span, toolbar) {
    const rows = decodeTimeline(tl);
    const rowH = 26, laneH = 8, laneGap = 2, pitch = rowH + laneGap + laneH + 8, top = 26, left = 62;
    canvas.dataset.height = String(top + rows.length * pitch + 8);
    const full = { lo: 0, hi: Math.max(1, span) };
    let view = { lo: full.lo, hi: full.hi };
    let geometry = null;
    const readout = toolbar ? toolbar.querySelector(".zoom-readout") : null;

    // Draws one lane; segments under a pixel are gathered into that pixel, coloured by the longest.
    function drawLane(ctx, box, k, lane, y, h) {
      let marks = 0;
      const first = Math.max(0, lowerBound(lane.start, view.lo - lane.maxDur));
      let curPx = -1, curBest = -1, curKind = 0;
      const flush = () => {
        if (curPx < 0) return;
        ctx.fillStyle = tl.colours[curKind];
        ctx.fillRect(curPx, y, 1, h);
        marks++;
        curPx = -1;
      };
      for (let i = first; i < lane.start.length; i++) {
        const s = lane.start[i];
        if (s > view.hi) break;
        const e = s + lane.dur[i];
        if (e < view.lo) continue;
        let x0 = box.x + (s - view.lo) * k, x1 = box.x + (e - view.lo) * k;
        if (x0 < box.x) x0 = box.x;
        if (x1 > box.x + box.w) x1 = box.x + box.w;
        if (x1 - x0 >= 1) {
          flush();
          ctx.fillStyle = tl.colours[lane.kind[i]];
          ctx.fillRect(x0, y, x1 - x0, h);
          marks++;
        } else {
          const px = Math.floor(x0);
          if (px !== curPx) { flush(); curPx = px; curBest = lane.dur[i]; curKind = lane.kind[i]; }
          else if (lane.dur[i] > curBest) { curBest = lane.dur[i]; curKind = lane.kind[i]; }
        }
      }
      flush();
      return marks;
    }

    function draw() {
      const { ctx, width, height } = prepare(canvas);
      const box = { x: left, y: top, w: width - left - 10, h: height - top - 6 };
      const k = box.w / (view.hi - view.lo);
      ctx.strokeStyle = "#e6e9ed";
      ctx.fillStyle = "#57606a";
      ctx.textAlign = "center";
      for (const v of valueTicks(view.lo, view.hi, Math.max(2, Math.floor(box.w / 110)))) {
        const x = Math.round(box.x + (v - view.lo) * k) + 0.5;
        ctx.beginPath(); ctx.moveTo(x, top - 4); ctx.lineTo(x, height - 4); ctx.stroke();
        ctx.fillText(fmtShort(v), x, 10);
      }
      let marks = 0;
      rows.forEach((row, r) => {
        const y = top + r * pitch + 3;
        ctx.fillStyle = "#24292f";
        ctx.textAlign = "left";
        ctx.fillText("IPU " + row.ipu, 6, y + rowH / 2);
        marks += drawLane(ctx, box, k, row, y, rowH);
        ctx.globalAlpha = 0.55;
        marks += drawLane(ctx, box, k, row.overlapped, y + rowH + laneGap, laneH);
        ctx.globalAlpha = 1;
      });
      canvas.dataset.marks = String(marks);
      canvas.dataset.viewLo = String(Math.round(view.lo));
      canvas.dataset.viewHi = String(Math.round(view.hi));
      if (readout) {
        const zoom = (full.hi - full.lo) / (view.hi - view.lo);
        readout.textContent = "cycles " + fmtInt(view.lo) + " \u2013 " + fmtInt(view.hi) +
          (zoom > 1.01 ? " (zoom \u00d7" + (zoom >= 100 ? fmtInt(zoom) : zoom.toFixed(1)) + ")" : "");
      }
      geometry = { box: box, k: k };
    }

    function redraw() { safeDraw(chart); }

    function zoomAt(px, factor) {
      const box = geometry.box;
      const t = view.lo + (Math.min(Math.max(px, box.x), box.x + box.w) - box.x) / geometry.k;
      let width = (view.hi - view.lo) * factor;
      width = Math.min(full.hi - full.lo, Math.max(width, 20));
      let lo = t - (t - view.lo) * (width / (view.hi - view.lo));
      lo = Math.max(full.lo, Math.min(lo, full.hi - width));
      view = { lo: lo, hi: lo + width };
      redraw();
    }

    function panBy(dxPixels) {
      const width = view.hi - view.lo;
      let lo = view.lo - dxPixels / geometry.k;
      lo = Math.max(full.lo, Math.min(lo, full.hi - width));
      view = { lo: lo, hi: lo + width };
      redraw();
    }

    function find(ev) {
      const box = geometry.box;
      const x = localX(canvas, ev), yy = localY(canvas, ev);
      const r = Math.floor((yy - top) / pitch);
      if (r < 0 || r >= rows.length || x < box.x) return null;
      const row = (yy - top - r * pitch) > rowH + 3 ? rows[r].overlapped : rows[r];
      const t = view.lo + (x - box.x) / geometry.k;
      const tol = 1.5 / geometry.k;
      let i = lowerBound(row.start, t + tol) - 1;
      let best = -1;
      for (; i >= 0 && row.start[i] + row.maxDur >= t - tol; i--) {
        if (row.start[i] - tol <= t && t <= row.start[i] + row.dur[i] + tol) {
          if (best < 0 || row.dur[i] > row.dur[best]) best = i;
          if (row.start[i] <= t) break;
        }
      }
      return best < 0 ? null : { row: row, i: best };
    }

    canvas.addEventListener("wheel", (ev) => {
      if (!geometry) return;
      ev.preventDefault();
      zoomAt(localX(canvas, ev), ev.deltaY < 0 ? 0.8 : 1.25);
    }, { passive: false });
    let drag = null;
    canvas.addEventListener("pointerdown", (ev) => {
      drag = { x: ev.clientX };
      canvas.classList.add("dragging");
      if (canvas.setPointerCapture) canvas.setPointerCapture(ev.pointerId);
    });
    canvas.addEventListener("pointermove", (ev) => {
      if (!geometry) return;
      if (drag) {
        const dx = ev.clientX - drag.x;
        drag.x = ev.clientX;
        if (dx) panBy(dx);
        return;
      }
      const hit = find(ev);
      if (!hit) { hideTip(); return; }
      const row = hit.row, i = hit.i;
      const s = row.start[i] + tl.t0, e = s + row.dur[i];
      const count = row.count ? row.count[i] : 1;
      const stepId = row.step[i];
      const at = tl.step_ids ? lowerBound(tl.step_ids, stepId) : stepId - tl.first_step_id;
      const name = tl.names[tl.step_names[at]] || "";
      const kind = tl.types[row.kind[i]];
      const lines = count > 1
        ? [count + " steps merged for display (mostly " + kind + "); longest: step " + stepId + (name ? " " + name : "")]
        : ["Step " + stepId + ": " + kind + (name ? "\n" + name : "")];
      if (row.steps === undefined) lines.push("running beside the steps of the lane above (overlapped)");
      lines.push("IPU " + row.ipu + ", cycles " + fmtInt(s) + " \u2013 " + fmtInt(e) + " (" + fmtInt(e - s) + " cycles" +
                 (tl.clock_frequency > 0 ? ", " + ((e - s) / tl.clock_frequency * 1e6).toFixed(3) + " \u00b5s" : "") + ")");
      showTip(ev, lines.join("\n"));
    });
    const endDrag = () => { drag = null; canvas.classList.remove("dragging"); };
    canvas.addEventListener("pointerup", endDrag);
    canvas.addEventListener("pointercancel", endDrag);
    canvas.addEventListener("mouseleave", hideTip);
    canvas.addEventListener("dblclick", () => { view = { lo: full.lo, hi: full.hi }; redraw(); });
    if (toolbar) {
      toolbar.addEventListener("click", (ev) => {
        const action = ev.target && ev.target.dataset ? ev.target.dataset.action : null;
        if (!action || !geometry) return;
        const mid = geometry.box.x + geometry.box.w / 2;
        if (action === "zoom-in") zoomAt(mid, 0.5);
        else if (action === "zoom-out") zoomAt(mid, 2);
        else if (action === "reset") { view = { lo: full.lo, hi: full.hi }; redraw(); }
      });
    }
    const chart = { canvas: canvas, draw: draw };
    charts.push(chart);
    safeDraw(chart);
  }

  // -- bar chart (cycles by vertex type) ----------------------------------------------------

  function barChart(canvas, rows, colour) {
    let geometry = null;
    function draw() {
      const { ctx, width, height } = prepare(canvas);
      const labelW = Math.min(480, Math.floor(width * 0.45));
      const box = { x: labelW + 8, y: 6, w: width - labelW - 8 - 90, h: height - 12 };
      const barH = Math.max(6, box.h / rows.length);
      const max = Math.max(1, ...rows.map((r) => r.cycles));
      let marks = 0;
      rows.forEach((r, i) => {
        const y = box.y + i * barH;
        let name = r.name;
        if (ctx.measureText(name).width > labelW - 6) {
          // Keep the start (the namespace and vertex) and the end (the template arguments): cut the middle.
          let head = Math.ceil(name.length / 2), tail = Math.floor(name.length / 2);
          const cut = () => r.name.slice(0, head) + "\u2026" + r.name.slice(r.name.length - tail);
          while (head + tail > 4 && ctx.measureText(cut()).width > labelW - 6) {
            if (head > tail) head--; else tail--;
          }
          name = cut();
        }
        ctx.fillStyle = "#24292f";
        ctx.textAlign = "right";
        ctx.fillText(name, labelW, y + barH / 2);
        const w = Math.max(1, (r.cycles / max) * box.w);
        ctx.fillStyle = colour;
        ctx.fillRect(box.x, y + 2, w, barH - 4);
        ctx.fillStyle = "#57606a";
        ctx.textAlign = "left";
        ctx.fillText(fmtShort(r.cycles) + " (" + r.percent.toFixed(1) + "%)", box.x + w + 5, y + barH / 2);
        marks++;
      });
      canvas.dataset.marks = String(marks);
      geometry = { box: box, barH: barH };
    }
    canvas.addEventListener("mousemove", (ev) => {
      if (!geometry) return;
      const i = Math.floor((localY(canvas, ev) - geometry.box.y) / geometry.barH);
      if (i < 0 || i >= rows.length) { hideTip(); return; }
      const r = rows[i];
      showTip(ev, r.name + "\n" + fmtInt(r.cycles) + " cycles (" + r.percent.toFixed(1) + "%), " +
              fmtInt(r.instances) + " instances");
    });
    canvas.addEventListener("mouseleave", hideTip);
    register(canvas, draw);
  }

  // -- sortable tables ------------------------------------------------------------------------

  function sortable(table) {
    const heads = Array.from(table.tHead.rows[0].cells);
    heads.forEach((th, column) => {
      th.addEventListener("click", () => {
        const descending = th.getAttribute("aria-sort") !== "descending";
        heads.forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        const body = table.tBodies[0];
        const numeric = th.classList.contains("num");
        const key = (tr) => {
          const cell = tr.cells[column];
          if (!cell) return numeric ? -Infinity : "";
          if (numeric) {
            const v = parseFloat(cell.dataset.value);
            return isNaN(v) ? -Infinity : v;
          }
          return cell.textContent.toLowerCase();
        };
        const rows = Array.from(body.rows).map((tr, i) => [key(tr), i, tr]);
        rows.sort((a, b) => {
          const c = a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1];
          return descending && a[0] !== b[0] ? -c : c;
        });
        const frag = document.createDocumentFragment();
        rows.forEach((r) => frag.appendChild(r[2]));
        body.appendChild(frag);
      });
    });
    table.dataset.sortable = "1";
  }

  // -- program tree ---------------------------------------------------------------------------

  const PAGE_SIZE = 200;

  function programTree(container, prog) {
    const n = prog.type.length;
    const offset = new Int32Array(n + 1);
    for (let i = 0; i < n; i++) offset[i + 1] = offset[i] + prog.children_count[i];
    let rendered = 0;
    const notes = new Map();
    const note = (pos, text) => notes.set(pos, notes.has(pos) ? notes.get(pos) + "; " + text : text);
    prog.repeat.program.forEach((pos, i) => note(pos, "\u00d7" + fmtInt(prog.repeat.count[i])));
    prog.calls.program.forEach((pos, i) => {
      const target = prog.calls.target[i];
      const label = target >= 0 ? prog.labels[prog.label[target]] : "";
      note(pos, "calls program " + prog.calls.target_id[i] + (label ? " (" + label + ")" : ""));
    });
    prog.executed.program.forEach((pos, i) => {
      const n = prog.executed.count[i];
      note(pos, fmtInt(n) + " execution" + (n === 1 ? "" : "s") + ", " + fmtInt(prog.executed.cycles[i]) + " cycles");
    });

    function head(pos) {
      const type = prog.types[prog.type[pos]];
      const label = prog.labels[prog.label[pos]];
      const id = prog.ids ? prog.ids[pos] : pos;
      const text = notes.get(pos);
      return '<span class="ptype" style="color:' + prog.colours[prog.type[pos]] + '">' + esc(type) + "</span> " +
        (label ? esc(label) + " " : "") + '<span class="pid">#' + id + "</span>" +
        (text ? ' <span class="pnote">\u2014 ' + esc(text) + "</span>" : "") +
        (prog.children_count[pos] ? ' <span class="pid">(' + fmtInt(prog.children_count[pos]) + ")</span>" : "");
    }

    function node(pos, depth) {
      rendered++;
      if (!prog.children_count[pos]) {
        const leaf = document.createElement("div");
        leaf.className = "leaf";
        leaf.innerHTML = head(pos);
        return leaf;
      }
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.innerHTML = head(pos);
      details.appendChild(summary);
      const kids = document.createElement("div");
      kids.className = "kids";
      details.appendChild(kids);
      let shown = 0;
      const more = () => {
        const end = Math.min(offset[pos + 1], offset[pos] + shown + PAGE_SIZE);
        const frag = document.createDocumentFragment();
        for (let c = offset[pos] + shown; c < end; c++) frag.appendChild(node(prog.children[c], depth + 1));
        shown = end - offset[pos];
        const old = kids.querySelector(":scope > button.more");
        if (old) old.remove();
        kids.appendChild(frag);
        if (shown < prog.children_count[pos]) {
          const button = document.createElement("button");
          button.className = "more";
          button.textContent = "show " + fmtInt(Math.min(PAGE_SIZE, prog.children_count[pos] - shown)) + " more of " +
            fmtInt(prog.children_count[pos] - shown);
          button.addEventListener("click", more);
          kids.appendChild(button);
        }
        container.dataset.nodes = String(rendered);
      };
      details.addEventListener("toggle", () => { if (details.open && shown === 0) more(); });
      if (depth < 1) { details.open = true; more(); }
      return details;
    }

    const groups = [["Control programs", prog.control], ["Functions", prog.functions]];
    for (const [title, list] of groups) {
      if (!list.length) continue;
      const t = document.createElement("div");
      t.className = "root-title";
      t.textContent = title + " (" + list.length + ")";
      container.appendChild(t);
      const frag = document.createDocumentFragment();
      list.slice(0, PAGE_SIZE).forEach((pos) => frag.appendChild(node(pos, 0)));
      container.appendChild(frag);
    }
    if (!container.childNodes.length) container.innerHTML = '<p class="empty">No control programs recorded.</p>';
    container.dataset.nodes = String(rendered);
    const bar = container.previousElementSibling;
    if (bar && bar.classList.contains("toolbar")) {
      bar.addEventListener("click", (ev) => {
        const action = ev.target && ev.target.dataset ? ev.target.dataset.action : null;
        if (action === "collapse") container.querySelectorAll("details[open]").forEach((d) => { d.open = false; });
        if (action === "expand") container.querySelectorAll(":scope > details").forEach((d) => { d.open = true; });
      });
    }
  }

  // -- set-up ---------------------------------------------------------------------------------

  // Deflate's length and distance codes (RFC 1951, section 3.2.5).
  const LEN_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163,
    195, 227, 258];
  const LEN_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
  const DIST_BASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049,
    3073, 4097, 6145, 8193, 12289, 16385, 24577];
  const DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
  const CODE_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

  /**
   * Inflate zlib data (RFC 1950 around RFC 1951) synchronously, so that the charts are drawn before the
   * page's load event: a print, a PDF or a headless screenshot taken at load shows them complete.
   */
  function inflate(bytes) {
    if (bytes.length < 6 || (bytes[0] & 15) !== 8) throw new Error("the report's data is not zlib data");
    let pos = 2, bitBuf = 0, bitCnt = 0;
    let out = new Uint8Array(Math.max(1 << 16, bytes.length * 4)), n = 0;
    const damaged = () => new Error("the report's data is damaged");
    function bits(count) {
      while (bitCnt < count) {
        if (pos >= bytes.length) throw damaged();
        bitBuf |= bytes[pos++] << bitCnt;
        bitCnt += 8;
      }
      const value = bitBuf & ((1 << count) - 1);
      bitBuf >>>= count;
      bitCnt -= count;
      return value;
    }
    function room(count) {
      if (n + count <= out.length) return;
      let size = out.length * 2;
      while (size < n + count) size *= 2;
      const bigger = new Uint8Array(size);
      bigger.set(out.subarray(0, n));
      out = bigger;
    }
    function huffman(lengths) {
      const counts = new Uint16Array(16), offsets = new Uint16Array(16);
      for (let i = 0; i < lengths.length; i++) counts[lengths[i]]++;
      counts[0] = 0;
      for (let len = 1; len < 16; len++) offsets[len] = offsets[len - 1] + counts[len - 1];
      const symbols = new Uint16Array(lengths.length);
      for (let i = 0; i < lengths.length; i++) if (lengths[i]) symbols[offsets[lengths[i]]++] = i;
      return { counts: counts, symbols: symbols };
    }
    function decode(h) {
      let code = 0, first = 0, index = 0;
      for (let len = 1; len < 16; len++) {
        code |= bits(1);
        const count = h.counts[len];
        if (code - first < count) return h.symbols[index + code - first];
        index += count;
        first = (first + count) << 1;
        code <<= 1;
      }
      throw damaged();
    }
    const fixedLengths = new Uint8Array(288);
    fixedLengths.fill(8, 0, 144); fixedLengths.fill(9, 144, 256); fixedLengths.fill(7, 256, 280);
    fixedLengths.fill(8, 280, 288);
    const fixed = { lit: huffman(fixedLengths), dist: huffman(new Uint8Array(30).fill(5)) };
    let last = 0;
    while (!last) {
      last = bits(1);
      const type = bits(2);
      if (type === 0) {
        bitBuf = 0; bitCnt = 0;
        if (pos + 4 > bytes.length) throw damaged();
        const len = bytes[pos] | (bytes[pos + 1] << 8);
        pos += 4;
        if (pos + len > bytes.length) throw damaged();
        room(len);
        out.set(bytes.subarray(pos, pos + len), n);
        n += len; pos += len;
        continue;
      }
      let codes = fixed;
      if (type === 2) {
        const nlit = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4;
        const codeLengths = new Uint8Array(19);
        for (let i = 0; i < ncode; i++) codeLengths[CODE_ORDER[i]] = bits(3);
        const codeCodes = huffman(codeLengths);
        const lengths = new Uint8Array(nlit + ndist);
        for (let i = 0; i < nlit + ndist;) {
          const sym = decode(codeCodes);
          if (sym < 16) { lengths[i++] = sym; continue; }
          let value = 0, repeat;
          if (sym === 16) {
            if (i === 0) throw damaged();
            value = lengths[i - 1]; repeat = 3 + bits(2);
          } else if (sym === 17) repeat = 3 + bits(3);
          else repeat = 11 + bits(7);
          if (i + repeat > nlit + ndist) throw damaged();
          lengths.fill(value, i, i + repeat);
          i += repeat;
        }
        codes = { lit: huffman(lengths.subarray(0, nlit)), dist: huffman(lengths.subarray(nlit)) };
      } else if (type !== 1) {
        throw damaged();
      }
      for (;;) {
        const sym = decode(codes.lit);
        if (sym < 256) { room(1); out[n++] = sym; continue; }
        if (sym === 256) break;
        const li = sym - 257;
        if (li >= 29) throw damaged();
        const len = LEN_BASE[li] + bits(LEN_EXTRA[li]);
        const di = decode(codes.dist);
        if (di >= 30) throw damaged();
        const dist = DIST_BASE[di] + bits(DIST_EXTRA[di]);
        if (dist > n) throw damaged();
        room(len);
        for (let k = 0; k < len; k++, n++) out[n] = out[n - dist];
      }
    }
    return out.subarray(0, n);
  }

  function loadData() {
    const element = document.getElementById("pva-data");
    if (element.dataset.encoding !== "deflate-base64") return JSON.parse(element.textContent);
    const binary = atob(element.textContent.trim());
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return JSON.parse(new TextDecoder().decode(inflate(bytes)));
  }

  /** Buttons with data-<key> in every toolbar matching `selector` choose one setting of a chart kind. */
  function toggle(selector, key, get, set, chart) {
    const bars = document.querySelectorAll(selector);
    const mark = () => bars.forEach((bar) => bar.querySelectorAll("button").forEach((b) => {
      b.classList.toggle("active", b.dataset[key] === get());
    }));
    bars.forEach((bar) => bar.addEventListener("click", (ev) => {
      const value = ev.target && ev.target.dataset ? ev.target.dataset[key] : null;
      if (!value) return;
      set(value);
      mark();
      charts.filter((c) => c.canvas.dataset.chart === chart).forEach(safeDraw);
    }));
    mark();
  }

  function each(selector, fn) {
    document.querySelectorAll(selector).forEach((element) => {
      try { fn(element); } catch (err) {
        failures++;
        console.error("pva: could not set up " + selector + ":", err);
      }
    });
  }

  // Everything is set up and drawn synchronously while the script runs, before the load event.
  function main() {
    PAGE = loadData();
    const reports = PAGE.reports, shared = PAGE.shared;
    memoryScale = shared.memory_data_max_excluding >= 0.25 * shared.memory_limit ? "limit" : "data";
    each('canvas[data-chart="memory"]', (c) => {
      const mem = reports[+c.dataset.report].memory;
      memoryChart(c, mem, mem.ipus[+c.dataset.ipu], shared);
    });
    toggle(".toolbar.memory-scale", "scale", () => memoryScale, (v) => { memoryScale = v; }, "memory");
    toggle(".toolbar.memory-gaps", "gaps", () => memoryGaps, (v) => {
      memoryGaps = v;
      document.querySelectorAll(".legend-gaps").forEach((span) => { span.hidden = v !== "including"; });
      document.querySelectorAll(".caption-gaps").forEach((span) => { span.hidden = span.dataset.gaps !== v; });
    }, "memory");
    each('canvas[data-chart="liveness"]', (c) => {
      livenessChart(c, reports[+c.dataset.report].liveness, shared);
    });
    toggle(".toolbar.liveness-mode", "mode", () => livenessMode, (v) => { livenessMode = v; }, "liveness");
    each('canvas[data-chart="timeline"]', (c) => {
      const bar = c.parentElement.querySelector(".toolbar");
      timelineChart(c, reports[+c.dataset.report].timeline, shared.timeline_span, bar);
    });
    each('canvas[data-chart="vertex-types"]', (c) => {
      barChart(c, reports[+c.dataset.report].vertex_types.rows, "#4e79a7");
    });
    each("table.sortable", sortable);
    each(".tree[data-report]", (div) => programTree(div, reports[+div.dataset.report].programs));
    let timer = null;
    let lastWidth = window.innerWidth;
    window.addEventListener("resize", () => {
      if (window.innerWidth === lastWidth) return;
      lastWidth = window.innerWidth;
      clearTimeout(timer);
      timer = setTimeout(() => charts.forEach(safeDraw), 150);
    });
  }

  try {
    main();
  } catch (err) {
    failures++;
    console.error("pva: the report could not be set up:", err);
  } finally {
    root.dataset.pvaFailures = String(failures);
    root.dataset.pvaReady = "1";
  }
})();
