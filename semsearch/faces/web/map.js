/* semsearch corpus map: a dependency-free canvas renderer for map.json (see semsearch/store/corpus_map.py).
 *
 *   var handle = SemsearchMap.render(container, mapData, {onSelect: function (docId) {...}});
 *   handle.highlight(["6a24ce769ac8de0d", ...]);  // light up hits, dim the rest
 *   handle.clear();                                // back to the plain map
 *
 * Used by the web page (/static/map.js) and inlined into the file `semsearch map --out` writes.
 * Canvas rather than SVG so that 150k points stay smooth: points are drawn in one path per cluster,
 * and hover/click look up a uniform grid instead of scanning every point.
 */
(function (global) {
  "use strict";

  // Tableau-like hues that stay apart on white; clusters beyond 20 reuse them (labels tell them apart).
  var PALETTE = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#6b8e23", "#1f77b4", "#d62728", "#9467bd", "#17becf", "#bcbd22", "#8c564b", "#e377c2", "#2ca02c",
    "#ff7f0e", "#7f7f7f"
  ];
  var PAD = 28; // CSS pixels kept free around the layout so edge points and labels are not clipped

  var LABEL_MARGIN = 6; // CSS pixels between a label (its swatch included) and the panel's edge

  // A label's box [x0, y0, x1, y1] centred on its cluster but slid inside the panel: a cluster near the edge
  // keeps its whole label instead of losing the part past the edge.
  function labelBox(sx, sy, w, h, width, height) {
    var x0 = Math.max(LABEL_MARGIN, Math.min(sx - w / 2, width - LABEL_MARGIN - w));
    var y0 = Math.max(LABEL_MARGIN, Math.min(sy - h / 2, height - LABEL_MARGIN - h));
    return [x0, y0, x0 + w, y0 + h];
  }

  // The label, shortened at a word with an ellipsis when it is wider than the panel (measure gives a width).
  function fitLabel(label, room, measure) {
    if (measure(label) <= room) return label;
    var words = label.split(" ");
    while (words.length > 1) {
      words.pop();
      var t = words.join(" ").replace(/[\s·]+$/, "") + " …";
      if (measure(t) <= room) return t;
    }
    return words[0] + " …";
  }

  function clusterColor(id) {
    return PALETTE[((id % PALETTE.length) + PALETTE.length) % PALETTE.length];
  }

  function render(container, data, options) {
    options = options || {};
    var points = data.points || [];
    var labels = data.labels || [];
    var clusters = data.clusters || [];
    var n = points.length;
    var xs = new Float32Array(n), ys = new Float32Array(n), cl = new Int32Array(n), ids = new Array(n);
    var indexOf = new Map();
    for (var i = 0; i < n; i++) {
      ids[i] = points[i][0]; xs[i] = points[i][1]; ys[i] = points[i][2]; cl[i] = points[i][3];
      indexOf.set(ids[i], i);
    }
    // Points ordered by cluster, so each cluster is one fill with one colour.
    var byCluster = [];
    for (i = 0; i < n; i++) {
      (byCluster[cl[i]] = byCluster[cl[i]] || []).push(i);
    }
    var baseRadius = n > 50000 ? 1.1 : n > 10000 ? 1.6 : n > 2000 ? 2.2 : n > 300 ? 3 : 4.5;

    // Uniform grid over [0,1]^2 for hit-testing: about 4 points per cell.
    var G = Math.max(8, Math.min(512, Math.round(Math.sqrt(n / 4))));
    var grid = new Array(G * G);
    for (i = 0; i < n; i++) {
      var key = cell(xs[i]) * G + cell(ys[i]);
      (grid[key] = grid[key] || []).push(i);
    }
    function cell(v) { return Math.max(0, Math.min(G - 1, Math.floor(v * G))); }

    if (getComputedStyle(container).position === "static") container.style.position = "relative";
    var canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", "Map of " + n + (n === 1 ? " document" : " documents") + " in " + clusters.length +
      (clusters.length === 1 ? " cluster" : " clusters"));
    canvas.style.cssText = "position:absolute;inset:0;width:100%;height:100%;display:block;cursor:grab;";
    var tip = document.createElement("div");
    tip.style.cssText = "position:absolute;pointer-events:none;display:none;max-width:360px;padding:6px 9px;" +
      "background:rgba(20,24,33,.92);color:#fff;font:13px/1.35 system-ui,sans-serif;border-radius:6px;" +
      "box-shadow:0 2px 8px rgba(0,0,0,.25);z-index:2;";
    container.appendChild(canvas);
    container.appendChild(tip);
    var out = canvas.getContext("2d");
    // Points and labels are drawn into an offscreen layer that hover and selection only copy, so moving the
    // mouse over 150k points does not redraw them; the layer is redrawn when the view or highlight changes.
    var layer = document.createElement("canvas");
    var ctx = layer.getContext("2d");
    var dirty = true;

    var width = 0, height = 0, dpr = 1;
    var view = { scale: 1, tx: 0, ty: 0 }; // zoom and pan on top of the fit-to-box transform
    var lit = null; // Uint8Array mask of highlighted points, or null
    var litCount = 0;
    var hover = -1, selected = -1;
    var pending = false;

    function fit() {
      var size = Math.max(10, Math.min(width, height) - 2 * PAD);
      return { size: size, ox: (width - size) / 2, oy: (height - size) / 2 };
    }
    function toScreenX(x, f) { return (f.ox + x * f.size) * view.scale + view.tx; }
    function toScreenY(y, f) { return (f.oy + (1 - y) * f.size) * view.scale + view.ty; }
    function toDataX(px, f) { return ((px - view.tx) / view.scale - f.ox) / f.size; }
    function toDataY(py, f) { return 1 - ((py - view.ty) / view.scale - f.oy) / f.size; }

    function resize() {
      var rect = container.getBoundingClientRect();
      width = Math.max(1, rect.width); height = Math.max(1, rect.height);
      dpr = global.devicePixelRatio || 1;
      canvas.width = layer.width = Math.round(width * dpr);
      canvas.height = layer.height = Math.round(height * dpr);
      dirty = true;
      draw();
    }

    function schedule(changed) {
      if (changed) dirty = true;
      if (pending) return;
      pending = true;
      (global.requestAnimationFrame || setTimeout)(function () { pending = false; draw(); });
    }

    function radius() { return baseRadius * Math.min(3, Math.sqrt(view.scale)); }

    function drawPoints(f, r, subset, alpha, colorOf) {
      var useRect = r < 1.8 || n > 20000; // arcs cost more than squares and look the same at this size
      ctx.globalAlpha = alpha;
      for (var c = 0; c < byCluster.length; c++) {
        var members = byCluster[c];
        if (!members) continue;
        ctx.fillStyle = colorOf(c);
        ctx.beginPath();
        for (var j = 0; j < members.length; j++) {
          var k = members[j];
          if (subset && !subset(k)) continue;
          var sx = toScreenX(xs[k], f), sy = toScreenY(ys[k], f);
          if (sx < -r || sy < -r || sx > width + r || sy > height + r) continue;
          if (useRect) ctx.rect(sx - r, sy - r, 2 * r, 2 * r);
          else { ctx.moveTo(sx + r, sy); ctx.arc(sx, sy, r, 0, 2 * Math.PI); }
        }
        ctx.fill();
      }
      ctx.globalAlpha = 1;
    }

    function ring(k, f, r, color) {
      if (k < 0) return;
      out.beginPath();
      out.arc(toScreenX(xs[k], f), toScreenY(ys[k], f), r + 3, 0, 2 * Math.PI);
      out.lineWidth = 2; out.strokeStyle = color; out.stroke();
    }

    function drawLabels(f, alpha) {
      ctx.globalAlpha = alpha;
      ctx.font = "600 13px system-ui, -apple-system, 'Segoe UI', sans-serif";
      ctx.textAlign = "center"; ctx.textBaseline = "middle";
      ctx.lineJoin = "round";
      var placed = [];
      // Biggest clusters first; a label that would overlap one already drawn is left out until zoomed in.
      var order = clusters.slice().sort(function (a, b) { return b.size - a.size; });
      for (var j = 0; j < order.length; j++) {
        var c = order[j];
        if (!c.label) continue;
        var sx = toScreenX(c.x, f), sy = toScreenY(c.y, f);
        if (sx < 0 || sx > width || sy < 0 || sy > height) continue; // its cluster is panned out of view
        var text = fitLabel(c.label, width - 2 * LABEL_MARGIN - 20, function (t) { return ctx.measureText(t).width; });
        var box = labelBox(sx, sy, ctx.measureText(text).width + 20, 18, width, height);
        var clash = false;
        for (var q = 0; q < placed.length && !clash; q++) {
          var o = placed[q];
          clash = box[0] < o[2] && box[2] > o[0] && box[1] < o[3] && box[3] > o[1];
        }
        if (clash) continue;
        placed.push(box);
        var cx = (box[0] + box[2]) / 2, cy = (box[1] + box[3]) / 2;
        ctx.lineWidth = 4; ctx.strokeStyle = "rgba(255,255,255,0.92)";
        ctx.strokeText(text, cx + 6, cy);
        ctx.fillStyle = "#1d2330";
        ctx.fillText(text, cx + 6, cy);
        // A swatch in the cluster's colour ties the label to its points.
        ctx.beginPath(); ctx.arc(box[0] + 2, cy, 5, 0, 2 * Math.PI);
        ctx.fillStyle = clusterColor(c.id); ctx.fill();
        ctx.lineWidth = 1.5; ctx.strokeStyle = "#ffffff"; ctx.stroke();
      }
      ctx.globalAlpha = 1;
    }

    function draw() {
      var f = fit(), r = radius();
      if (dirty) { drawLayer(f, r); dirty = false; }
      out.setTransform(1, 0, 0, 1, 0, 0);
      out.clearRect(0, 0, canvas.width, canvas.height);
      out.drawImage(layer, 0, 0);
      out.setTransform(dpr, 0, 0, dpr, 0, 0);
      ring(selected, f, r, "#1d2330");
      ring(hover, f, r, "#e15759");
    }

    function drawLayer(f, r) {
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, width, height);
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, 0, width, height);
      if (!n) {
        ctx.fillStyle = "#5b6475"; ctx.font = "14px system-ui, sans-serif"; ctx.textAlign = "center";
        ctx.fillText("The index holds no documents.", width / 2, height / 2);
        return;
      }
      if (!lit) {
        drawPoints(f, r, null, n > 20000 ? 0.55 : 0.85, clusterColor);
        drawLabels(f, 1);
        return;
      }
      // Hits go on top of the (fainter) labels: a lit paper must never hide under a cluster's name.
      drawPoints(f, r, null, 0.18, function () { return "#9aa3b2"; });
      drawLabels(f, 0.6);
      drawPoints(f, r * 1.6, function (k) { return lit[k] === 1; }, 1, clusterColor);
      // A dark rim makes hits stand out from same-coloured neighbours (skipped when there are too many to matter).
      ctx.lineWidth = 1; ctx.strokeStyle = "#1d2330";
      for (var k = 0; k < n && litCount <= 2000; k++) {
        if (!lit[k]) continue;
        ctx.beginPath(); ctx.arc(toScreenX(xs[k], f), toScreenY(ys[k], f), r * 1.6, 0, 2 * Math.PI); ctx.stroke();
      }
    }

    function nearest(px, py) {
      var f = fit();
      var x = toDataX(px, f), y = toDataY(py, f);
      var reach = (radius() + 5) / (f.size * view.scale); // hit radius in data units
      var best = -1, bestD = reach * reach;
      var c0 = cell(x - reach), c1 = cell(x + reach), r0 = cell(y - reach), r1 = cell(y + reach);
      for (var a = c0; a <= c1; a++) {
        for (var b = r0; b <= r1; b++) {
          var bucket = grid[a * G + b];
          if (!bucket) continue;
          for (var j = 0; j < bucket.length; j++) {
            var k = bucket[j];
            var dx = xs[k] - x, dy = ys[k] - y, d = dx * dx + dy * dy;
            // With hits lit, a lit point wins over a dimmed one at the same spot.
            if (lit && !lit[k]) d *= 1.5;
            if (d < bestD) { bestD = d; best = k; }
          }
        }
      }
      return best;
    }

    function showTip(k, px, py) {
      if (k < 0) { tip.style.display = "none"; return; }
      var c = clusters[cl[k]];
      tip.textContent = "";
      var t = document.createElement("div"); t.textContent = labels[k] || ids[k]; tip.appendChild(t);
      if (c && c.label) {
        var s = document.createElement("div");
        s.textContent = c.label; s.style.cssText = "opacity:.7;font-size:12px;margin-top:2px;";
        tip.appendChild(s);
      }
      tip.style.display = "block";
      var left = px + 14, top = py + 14;
      if (left + tip.offsetWidth > width) left = px - tip.offsetWidth - 14;
      if (top + tip.offsetHeight > height) top = py - tip.offsetHeight - 14;
      tip.style.left = Math.max(0, left) + "px"; tip.style.top = Math.max(0, top) + "px";
    }

    function local(ev) {
      var rect = canvas.getBoundingClientRect();
      return [ev.clientX - rect.left, ev.clientY - rect.top];
    }

    var drag = null;
    function onDown(ev) {
      if (ev.button !== 0) return;
      var p = local(ev);
      drag = { x: p[0], y: p[1], tx: view.tx, ty: view.ty, moved: false };
    }
    function onMove(ev) {
      var p = local(ev);
      if (drag) {
        var dx = p[0] - drag.x, dy = p[1] - drag.y;
        if (!drag.moved && dx * dx + dy * dy > 16) { drag.moved = true; canvas.style.cursor = "grabbing"; }
        if (drag.moved) {
          view.tx = drag.tx + dx; view.ty = drag.ty + dy;
          tip.style.display = "none"; hover = -1; schedule(true);
          return;
        }
      }
      var k = nearest(p[0], p[1]);
      if (k !== hover) { hover = k; schedule(); }
      canvas.style.cursor = k >= 0 ? "pointer" : "grab";
      showTip(k, p[0], p[1]);
    }
    function onUp(ev) {
      if (!drag) return;
      var wasDrag = drag.moved;
      drag = null;
      canvas.style.cursor = "grab";
      if (wasDrag) return;
      var p = local(ev);
      var k = nearest(p[0], p[1]);
      if (k < 0) return;
      selected = k; schedule();
      if (options.onSelect) options.onSelect(ids[k]);
    }
    function onLeave() { hover = -1; tip.style.display = "none"; drag = null; schedule(); }
    function onWheel(ev) {
      ev.preventDefault();
      var p = local(ev);
      var factor = Math.exp(-ev.deltaY * (ev.deltaMode === 1 ? 0.05 : 0.0015));
      var scale = Math.max(1, Math.min(200, view.scale * factor));
      factor = scale / view.scale;
      // Zoom about the cursor: the data point under it stays under it.
      view.tx = p[0] - (p[0] - view.tx) * factor; view.ty = p[1] - (p[1] - view.ty) * factor;
      view.scale = scale;
      if (scale === 1) { view.tx = 0; view.ty = 0; }
      schedule(true);
    }
    function onDouble() { view = { scale: 1, tx: 0, ty: 0 }; schedule(true); }

    canvas.addEventListener("mousedown", onDown);
    canvas.addEventListener("mousemove", onMove);
    canvas.addEventListener("mouseup", onUp);
    canvas.addEventListener("mouseleave", onLeave);
    canvas.addEventListener("wheel", onWheel, { passive: false });
    canvas.addEventListener("dblclick", onDouble);
    var observer = global.ResizeObserver ? new ResizeObserver(resize) : null;
    if (observer) observer.observe(container); else global.addEventListener("resize", resize);
    resize();

    return {
      /** Light up these documents (ids not on the map are ignored) and dim the rest. */
      highlight: function (docIds) {
        lit = new Uint8Array(n); litCount = 0;
        (docIds || []).forEach(function (id) {
          var k = indexOf.get(id);
          if (k !== undefined && !lit[k]) { lit[k] = 1; litCount++; }
        });
        schedule(true);
        return litCount;
      },
      /** Back to the plain map. */
      clear: function () { lit = null; litCount = 0; schedule(true); },
      /** Mark one document as selected (as a click does), without calling onSelect. */
      select: function (docId) { var k = indexOf.get(docId); selected = k === undefined ? -1 : k; schedule(); },
      resize: resize,
      destroy: function () {
        if (observer) observer.disconnect(); else global.removeEventListener("resize", resize);
        container.removeChild(canvas); container.removeChild(tip);
      }
    };
  }

  global.SemsearchMap = { render: render, clusterColor: clusterColor, labelBox: labelBox, fitLabel: fitLabel };
})(window);
