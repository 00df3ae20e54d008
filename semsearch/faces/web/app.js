// semsearch page: hash routes (#q=..., #doc=ID, #related=ID) over the JSON API. Text goes into the page only as
// text nodes (never innerHTML), so titles and abstracts cannot inject markup.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const view = $("view");
  const form = $("search-form");
  let mapHandle = null;
  let litIds = []; // what the map should light up, kept for when the map arrives after the results
  let pending = 0; // each render bumps it; a response for an older route is dropped

  // el("a", {href: "#"}, "text", child) -> element; strings become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "className") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function show(...nodes) {
    view.replaceChildren(...nodes.flat().filter(Boolean));
  }

  async function api(path) {
    const response = await fetch(path, { headers: { Accept: "application/json" } });
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) {
      const message = body && body.error ? body.error : `HTTP ${response.status}`;
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return body;
  }

  function errorBox(error) {
    return el("p", { className: "error", role: "alert" }, error.message || String(error));
  }

  // ------------------------------------------------------------------ readable text
  // Markup in titles and abstracts shown as a person reads it: *emphasis*, **bold**, \textbf{x}, accents,
  // inline math with common commands as symbols. A small twin of semsearch/core/paperinfo.py plain_text (which
  // decodes with pylatexenc): it reads the seed abstracts alike (tests/core/test_paperinfo.py).
  const SYMBOLS = {
    alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ϵ", varepsilon: "ε", zeta: "ζ", eta: "η",
    theta: "θ", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν", xi: "ξ", pi: "π", rho: "ρ", sigma: "σ", tau: "τ",
    phi: "φ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω", Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ",
    Sigma: "Σ", Phi: "Φ", Psi: "Ψ", Omega: "Ω", times: "×", cdot: "·", leq: "≤", le: "≤", geq: "≥", ge: "≥",
    neq: "≠", approx: "≈", sim: "∼", gtrsim: "≳", lesssim: "≲", ll: "≪", gg: "≫", in: "∈", notin: "∉",
    subset: "⊂", subseteq: "⊆", infty: "∞", pm: "±", to: "→", rightarrow: "→", leftarrow: "←", mapsto: "↦",
    sum: "∑", prod: "∏", int: "∫", partial: "∂", nabla: "∇", forall: "∀", exists: "∃", ell: "ℓ", cdots: "⋯",
    ldots: "…", dots: "…", "|": "‖", mid: "|", star: "⋆", circ: "∘", log: "log", exp: "exp", min: "min",
    max: "max", sup: "sup", inf: "inf", lim: "lim", uparrow: "↑", downarrow: "↓", cup: "∪", cap: "∩",
    propto: "∝", top: "⊤", prime: "′", "%": "%", "&": "&", _: "_", "#": "#", $: "$", "{": "{", "}": "}",
    ",": " ", ";": " ", quad: " ", qquad: " ", "!": "", " ": " ",
  };
  const ACCENTS = {
    "'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "=": "\u0304", ".": "\u0307",
    c: "\u0327", v: "\u030c", u: "\u0306", H: "\u030b", k: "\u0328", r: "\u030a", tilde: "\u0303",
    widetilde: "\u0303", hat: "\u0302", widehat: "\u0302", bar: "\u0304", overline: "\u0305", dot: "\u0307",
    vec: "\u20d7",
  };
  const ARG = String.raw`(?:\{([^{}]*)\}|\s([\w.]))`;
  const RE = {
    letterAccent: /\\(['`^"~=.]|[cvuHkr](?=[\s{]))\s*(?:\{\s*([A-Za-z])\s*\}|([A-Za-z]))/g,
    mathAccent: /\\(tilde|widetilde|hat|widehat|bar|overline|dot|vec)\s*(?:\{([^{}]*)\}|([A-Za-z]))/g,
    wrapper: new RegExp(String.raw`\\(?:text(?:bf|it|tt|sc|sf|rm|normal|up|sl)?|emph|underline|mathrm|mathbf|` +
      String.raw`mathit|mathcal|mathbb|mathsf|mathtt|mathfrak|boldsymbol|bm|operatorname|mbox|textsuperscript|` +
      String.raw`textsubscript|url)\s*\{([^{}]*)\}`, "g"),
    frac: new RegExp(String.raw`\\[dt]?frac\s*` + ARG + String.raw`\s*` + ARG.replace("\\s(", "\\s?("), "g"),
    sqrt: new RegExp(String.raw`\\sqrt\s*` + ARG, "g"),
    href: /\\href\s*\{([^{}]*)\}\s*\{([^{}]*)\}/g,
    symbol: /\\([A-Za-z]+|[|%&_#${},;! ])/g,
    sizing: /\\(?:left|right|big|Big|bigg|Bigg)[lr]?\s*(?=[()\[\]|.\\])\.?/g,
    // Inline math as Python reads it (core.latex): "$" opens before a non-space and closes after one.
    math: /(?<!\\)\$(?=[^\s$])((?:[^$\\]|\\.)*?)(?<=[^\s\\])\$/g,
    scriptGroup: /([_^])\{([^{}]*)\}/g,
    bold: /\*\*(?=\S)(.+?)(?<=\S)\*\*/g,
    emphasis: /(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])/g,
    code: /`([^`\n]+)`/g,
    braces: /(?<!\\)[{}]/g,
  };
  const arg = (braced, bare) => (braced !== undefined ? braced : bare || "");
  function group(inner) {
    inner = inner.trim();
    if (!inner) return "";
    return /^(?:√?[\w.]+|.)$/u.test(inner) ? inner : `(${inner})`;
  }
  function latex(text, math) {
    if (!text.includes("\\") && !text.includes("{") && !math) return text;
    let out = text.replace(RE.letterAccent, (_, a, b, c) => (b || c) + ACCENTS[a]);
    for (let i = 0; i < 4; i++) {
      const before = out;
      out = out.replace(RE.wrapper, "$1");
      out = out.replace(RE.href, (_, url, label) => label.trim() || url);
      out = out.replace(RE.mathAccent, (_, a, b, c) => { const x = arg(b, c); return x.length === 1 ? x + ACCENTS[a] : x; });
      out = out.replace(RE.frac, (_, a, b, c, d) => `${group(arg(a, b))}/${group(arg(c, d))}`);
      out = out.replace(RE.sqrt, (_, a, b) => "√" + group(arg(a, b)));
      if (out === before) break;
    }
    out = out.replace(RE.sizing, "");
    out = out.replace(RE.symbol, (m, name) => (Object.hasOwn(SYMBOLS, name) ? SYMBOLS[name] : m));
    if (math) out = out.replace(RE.scriptGroup, (_, s, g) => s + group(g)).replace(/~/g, " ");
    return out.replace(RE.braces, "");
  }
  // Twins of semsearch/safe_text.py: terminal escapes, control characters (tab and newline kept) and bidi
  // overrides dropped; links only http(s), as the browser serialises them (quotes and spaces escaped).
  const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]?|\x9b[0-?]*[ -/]*[@-~]?|[\x1b\x9d]\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[@-_]?/g;
  const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
  // The twin of semsearch.core.wording.count: "1 paper", "2 papers".
  function count(n, noun, plural) {
    const number = typeof n === "number" ? n.toLocaleString() : String(n);
    return `${number} ${n === 1 ? noun : plural || noun + "s"}`;
  }

  function cleanText(text) {
    return String(text || "").replace(ESCAPES, "").replace(/\r\n?/g, "\n").replace(UNSAFE, "");
  }
  function safeUrl(value) {
    if (typeof value !== "string") return null;
    const url = value.trim();
    if (!url || /[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]/.test(url)) return null;
    let parsed;
    try { parsed = new URL(url); } catch (_) { return null; }
    if ((parsed.protocol !== "http:" && parsed.protocol !== "https:") || !parsed.hostname) return null;
    if (!/^https?:\/\//i.test(url)) return null; // "http:evil" parses against no base; a link must say its host
    return parsed.href; // the WHATWG serialisation: spaces, quotes and angle brackets percent-escaped
  }

  function readable(text) {
    text = cleanText(text);
    if (!/[*\\$`{]|--|''/.test(text)) return text;
    let out = text.replace(RE.math, (_, inner) => latex(inner, true));
    out = latex(out, false).replace(RE.bold, "$1").replace(RE.emphasis, "$1");
    out = out.replace(/---/g, "—").replace(/--/g, "–").replace(/``/g, "“").replace(/''/g, "”");
    return out.replace(RE.code, "$1").normalize("NFC");
  }
  window.semsearchReadable = readable; // for tests
  window.semsearchSafeUrl = safeUrl;

  // A sentence with [start, end) code-point spans wrapped in <mark> (Python counts code points, JS strings
  // count UTF-16 units, so slice an array of code points). The spans are marked with two private-use
  // characters before the markup is made readable, so the marks survive that rewriting.
  function marked(text, spans) {
    const chars = Array.from(text);
    let tagged = "";
    let last = 0;
    for (const [start, end] of spans || []) {
      if (start < last || end > chars.length) continue;
      tagged += chars.slice(last, start).join("") + "\uE000" + chars.slice(start, end).join("") + "\uE001";
      last = end;
    }
    tagged += chars.slice(last).join("");
    const out = [];
    for (const part of readable(tagged).split(/(\uE000[^\uE001]*\uE001)/)) {
      if (part.startsWith("\uE000")) out.push(el("mark", {}, part.slice(1, -1)));
      else if (part) out.push(part.replace(/[\uE000\uE001]/g, ""));
    }
    return out;
  }

  function titleOf(item) {
    return item.display_title || readable(item.title || item.label);
  }

  // "Hao Wang, Licheng Pan, … · NeurIPS 2025" and a link to the paper's page, when known.
  function aboutLine(item) {
    const link = safeUrl(item.link);
    if (!item.byline && !link) return null;
    let host = "";
    try { host = link ? new URL(link).hostname.replace(/^www\./, "") : ""; } catch (_) { host = "link"; }
    return el("p", { className: "byline" },
      item.byline || "",
      item.byline && link ? " · " : "",
      link ? el("a", { href: link, className: "paper-link", target: "_blank", rel: "noopener noreferrer" }, host) : null);
  }

  const EXPORT_FORMATS = [["bibtex", "BibTeX"], ["ris", "RIS"], ["csljson", "CSL-JSON"], ["csv", "CSV"]];
  function exportHref(ids, format) {
    const params = new URLSearchParams();
    for (const id of ids) params.append("ids", id);
    params.set("format", format);
    return "/api/export?" + params;
  }
  function exportLinks(ids, label) {
    const out = [label];
    EXPORT_FORMATS.forEach(([format, name], i) => {
      out.push(i ? " · " : " ", el("a", { href: exportHref(ids, format), className: `export-${format}`, target: "_blank" }, name));
    });
    return el("span", { className: "export" }, out);
  }

  function shortFile(path) {
    const parts = String(path).split("/");
    return parts[parts.length - 1];
  }

  function sourcesLine(sources) {
    if (!sources || !sources.length) return null;
    const items = sources.map((s) => el("code", { title: s.file }, `${shortFile(s.file)}:${s.kind} ${s.number}`));
    const out = [];
    items.forEach((item, i) => { if (i) out.push(", "); out.push(item); });
    return el("span", {}, sources.length > 1 ? "sources " : "source ", out);
  }

  function scoreText(hit) {
    const parts = [];
    if (hit.scores && hit.scores.dense !== undefined) parts.push(`cosine ${hit.scores.dense.toFixed(3)}`);
    if (hit.scores && hit.scores.lexical !== undefined) parts.push(`BM25 ${hit.scores.lexical.toFixed(2)}`);
    // A paper of the person the query named comes first for its author, not its score: say whose it is.
    if (hit.by) return { text: `by ${hit.by}`, title: "a paper of the person the query names" };
    return { text: hit.score.toFixed(3), title: `${hit.mode} score` + (parts.length ? ` (${parts.join(", ")})` : "") };
  }

  // A paper read from a PDF: the file (the server sends only a PDF the index read it from), at the passage's page.
  function pdfLink(item) {
    if (!(item.sources || []).some((s) => s.kind === "page")) return null;
    const page = item.passage && Number.isInteger(item.passage.page) ? `#page=${item.passage.page}` : "";
    return el("a", { href: `/api/documents/${encodeURIComponent(item.id)}/pdf${page}`, className: "pdf",
      target: "_blank", rel: "noopener noreferrer", title: "The PDF this paper was read from" }, "PDF");
  }

  function docLink(hit, className) {
    return el("a", { href: "#" + new URLSearchParams({ doc: hit.id }), className }, titleOf(hit));
  }

  function hitCard(hit) {
    const score = scoreText(hit);
    let snippet;
    if (hit.highlights && hit.highlights.length) {
      snippet = el("p", { className: "snippet" }, marked(hit.highlights[0], (hit.highlight_spans || [])[0]));
    } else {
      const text = readable(hit.text);
      snippet = el("p", { className: "snippet" }, text.length > 320 ? text.slice(0, 320) + "…" : text);
    }
    const collection = hit.metadata && hit.metadata.collection;
    // A full-text index: the passage that matched, with its page.
    const passage = hit.passage ? el("p", { className: "passage" },
      el("span", { className: "page" }, `p. ${hit.passage.page}`), " ", readable(hit.passage.text)) : null;
    return el("article", { className: "hit", "data-id": hit.id },
      el("div", { className: "hit-head" },
        el("span", { className: "rank" }, `${hit.rank}.`),
        docLink(hit, "hit-title"),
        el("span", { className: "score", title: score.title }, score.text)),
      aboutLine(hit),
      snippet,
      passage,
      el("div", { className: "meta" },
        sourcesLine(hit.sources),
        collection ? ` · ${cleanText(collection)}` : null,
        ` · id `, el("code", {}, hit.id)),
      // /api/recommend gives the liked paper as an object; /api/new says why in words (a string).
      typeof hit.because === "string" ? el("p", { className: "because" }, readable(hit.because)) :
      hit.because ? el("p", { className: "because" }, "because it is near ",
        hit.because.id ? el("a", { href: "#" + new URLSearchParams({ doc: hit.because.id }) }, readable(hit.because.label))
          : readable(hit.because.label), ` (cosine ${hit.because.cosine.toFixed(3)})`) : null,
      hit.added ? el("p", { className: "because" }, `arrived ${hit.added.at}`,
        hit.for && hit.for.length ? ` · for ${hit.for.join(", ")}` : "") : null,
      el("div", { className: "actions" },
        el("a", { href: "#" + new URLSearchParams({ related: hit.id }), className: "related" }, "Related papers"),
        el("a", { href: "#" + new URLSearchParams({ doc: hit.id }), className: "open" }, "Open"),
        pdfLink(hit),
        el("a", { href: exportHref([hit.id], "bibtex"), className: "cite", target: "_blank",
          title: "This paper as BibTeX" }, "Cite"),
        tagButtons(hit.id)));
  }

  // ------------------------------------------------------------------ like / not for me (tags "liked", "not-for-me")

  const LIKED = "liked";
  const NOT = "not-for-me";
  let tagState = { writable: false, tags: {} };

  async function loadTags() {
    try { tagState = await api("/api/tags"); } catch (_) { tagState = { writable: false, tags: {} }; }
  }

  function inTag(name, id) {
    const tag = tagState.tags[name];
    return Boolean(tag && tag.ids.includes(id));
  }

  // Tag writes are same-origin JSON POSTs; the server takes them only when started with --allow-tags.
  async function toggleTag(name, id) {
    const body = inTag(name, id) ? { remove: [id] } : { add: [id] };
    const response = await fetch(`/api/tags/${encodeURIComponent(name)}`, {
      method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) {
      let message = `HTTP ${response.status}`;
      try { message = (await response.json()).error || message; } catch (_) { /* keep the status */ }
      throw new Error(message);
    }
    await loadTags();
  }

  function tagButtons(id) {
    if (!tagState.writable) return null;
    const button = (name, label, pressedLabel) => {
      const pressed = inTag(name, id);
      return el("button", { type: "button", className: `tag-button ${name}`, "aria-pressed": String(pressed),
        "data-tag": name, onclick: async (event) => {
          const target = event.currentTarget;
          target.disabled = true;
          try {
            await toggleTag(name, id);
            const now = inTag(name, id);
            target.setAttribute("aria-pressed", String(now));
            target.textContent = now ? pressedLabel : label;
            if (location.hash.startsWith("#foryou")) route(); // the recommendations follow the tags at once
          } catch (error) {
            target.after(errorBox(error));
          } finally {
            target.disabled = false;
          }
        } }, pressed ? pressedLabel : label);
    };
    return el("span", { className: "tag-buttons" }, button(LIKED, "♡ like", "♥ liked"),
      button(NOT, "not for me", "✕ not for me"));
  }

  async function renderForYou(token) {
    await loadTags();
    if (token !== pending) return;
    document.title = "For you · semsearch";
    if (!tagState.tags[LIKED]) {
      show(el("p", { className: "hint", id: "status" },
        tagState.writable ? "Like a few papers (♡ on any hit) and recommendations appear here."
          : "Tag papers as 'liked' (semsearch tag add liked ID) and recommendations appear here."));
      return;
    }
    const query = new URLSearchParams({ like: LIKED, k: $("k").value || "10" });
    if (tagState.tags[NOT]) query.append("not", NOT);
    show(el("p", { className: "status" }, "Finding papers for you…"));
    let data;
    try { data = await api("/api/recommend?" + query); } catch (error) {
      if (token === pending) show(errorBox(error));
      return;
    }
    if (token !== pending) return;
    show(el("p", { className: "status", id: "status" },
      `For you: ${count(data.hits.length, "paper")} like the ${tagState.tags[LIKED].papers} you liked · ${data.method} · ${data.version}`),
    el("div", { id: "hits" }, data.hits.map(hitCard)));
    highlightMap(data.hits.map((h) => h.id));
  }

  async function renderNew(params, token) {
    const query = new URLSearchParams({ k: $("k").value || "20" });
    if (params.get("since")) query.set("since", params.get("since"));
    show(el("p", { className: "status" }, "Loading what arrived…"));
    let data;
    try { data = await api("/api/new?" + query); } catch (error) {
      if (token === pending) show(errorBox(error));
      return;
    }
    if (token !== pending) return;
    document.title = "New · semsearch";
    const since = params.get("since") ? `since ${params.get("since")}` : "in the latest build";
    show(el("p", { className: "status", id: "status" }, `New ${since}: ${count(data.hits.length, "paper")} · ${data.version}`),
      data.hits.length ? el("div", { id: "hits" }, data.hits.map(hitCard)) : el("p", { className: "hint" }, "Nothing new."));
    highlightMap(data.hits.map((h) => h.id));
  }

  function highlightMap(ids) {
    litIds = ids;
    if (mapHandle && typeof mapHandle.highlight === "function") {
      try { mapHandle.highlight(ids); } catch (e) { console.warn("map highlight failed", e); }
    }
  }

  // ------------------------------------------------------------------ routes

  function readForm() {
    const params = new URLSearchParams();
    params.set("q", $("q").value.trim());
    params.set("mode", $("mode").value);
    params.set("k", $("k").value || "10");
    for (const clause of $("where").value.split(";").map((s) => s.trim()).filter(Boolean)) params.append("where", clause);
    if ($("diverse").checked) params.set("diverse", "1");
    return params;
  }

  function fillForm(params) {
    $("q").value = params.get("q") || "";
    $("mode").value = params.get("mode") || "hybrid";
    $("k").value = params.get("k") || "10";
    $("where").value = params.getAll("where").join("; ");
    $("diverse").checked = params.get("diverse") === "1";
  }

  async function renderSearch(params, token) {
    fillForm(params);
    const query = new URLSearchParams();
    query.set("q", params.get("q") || "");
    query.set("k", params.get("k") || "10");
    query.set("mode", params.get("mode") || "hybrid");
    for (const clause of params.getAll("where")) query.append("where", clause);
    if (params.get("diverse") === "1") query.set("diverse", "true");
    if (params.get("exact") === "1") query.set("exact", "true");
    show(el("p", { className: "status" }, "Searching…"));
    let data;
    try {
      data = await api("/api/search?" + query);
    } catch (error) {
      if (token === pending) show(errorBox(error));
      return;
    }
    if (token !== pending) return;
    document.title = `${data.query} · semsearch`;
    const status = el("p", { className: "status", id: "status" },
      `${count(data.hits.length, "hit")} · ${data.mode} · ${data.took_ms} ms · ${data.version}`);
    // Typos corrected for BM25: say what was searched, and offer the words as typed.
    const asTyped = new URLSearchParams(params);
    asTyped.set("exact", "1");
    const spelling = data.spelling && data.spelling.corrections.length && data.mode !== "dense"
      ? el("p", { className: "hint", id: "spelling" }, `Searched for: ${data.spelling.searched_for} · `,
        el("a", { href: "#" + asTyped }, "search as typed"))
      : null;
    if (!data.hits.length) {
      show(status, spelling,
        el("p", { className: "hint" }, "Nothing matched. Try other words, another mode, or fewer filters."));
    } else {
      status.append(" · ", exportLinks(data.hits.map((h) => h.id), "Export hits:"));
      show(status, spelling, el("div", { id: "hits" }, data.hits.map(hitCard)));
    }
    highlightMap(data.hits.map((h) => h.id));
  }

  function neighbourList(hits) {
    return el("ol", {}, hits.map((hit) =>
      el("li", { "data-id": hit.id },
        docLink(hit, "neighbour"),
        el("span", { className: "score", title: "cosine similarity" }, ` ${hit.score.toFixed(3)}`))));
  }

  async function renderRelated(id, token) {
    show(el("p", { className: "status" }, "Finding related papers…"));
    let doc, related;
    try {
      [doc, related] = await Promise.all([api(`/api/documents/${encodeURIComponent(id)}`),
        api(`/api/related/${encodeURIComponent(id)}?k=10`)]);
    } catch (error) {
      if (token === pending) show(errorBox(error));
      return;
    }
    if (token !== pending) return;
    document.title = `Related to ${titleOf(doc)} · semsearch`;
    show(
      el("a", { href: "#", className: "back", onclick: (e) => { e.preventDefault(); history.back(); } }, "← back"),
      el("p", { className: "status", id: "status" }, "Papers nearest to ",
        el("a", { href: "#" + new URLSearchParams({ doc: doc.id }) }, titleOf(doc)), " (cosine similarity)"),
      el("div", { id: "hits" }, related.hits.map(hitCard)));
    highlightMap([doc.id, ...related.hits.map((h) => h.id)]);
  }

  // Authors as a list of names (the server reads lists, BibTeX strings and CSL names into doc.authors).
  function authorList(names) {
    return el("ul", { className: "authors" }, names.map((name) => el("li", {}, readable(name))));
  }

  // A metadata value as a person reads it: lists joined, records (the catalogue match) as "key: value" pairs.
  function factText(value) {
    if (value === null || value === undefined) return "";
    if (Array.isArray(value)) return value.map(factText).join(", ");
    if (typeof value === "object") {
      if (value.name || value.literal) return readable(value.name || value.literal);
      // As paperinfo.name_of writes a CSL name: "Teun van der Weij", "Martin Luther King Jr.".
      const parts = ["given", "dropping-particle", "non-dropping-particle", "family", "suffix"].map((k) => value[k]);
      if (value.family || value.given) return readable(parts.filter(Boolean).join(" "));
      return Object.entries(value).map(([k, v]) => `${k}: ${typeof v === "object" && v !== null
        ? JSON.stringify(v) : cleanText(String(v))}`).join(" · ");
    }
    return readable(String(value));
  }

  function factsTable(doc) {
    const rows = [["id", el("code", {}, doc.id)]];
    for (const [key, value] of Object.entries(doc.metadata || {})) {
      const authorKey = /^(authors?|creators)$/i.test(key);
      rows.push([key, authorKey && doc.authors && doc.authors.length ? authorList(doc.authors) : factText(value)]);
    }
    if (doc.external_ids && doc.external_ids.length) rows.push(["external ids", doc.external_ids.join(", ")]);
    for (const s of doc.sources || []) rows.push(["source", el("code", {}, `${s.file}:${s.kind} ${s.number}`)]);
    return el("table", { className: "facts" }, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))));
  }

  async function renderDocument(id, token) {
    show(el("p", { className: "status" }, "Loading…"));
    let doc;
    try {
      doc = await api(`/api/documents/${encodeURIComponent(id)}`);
    } catch (error) {
      if (token === pending) show(errorBox(error));
      return;
    }
    if (token !== pending) return;
    document.title = `${titleOf(doc)} · semsearch`;
    const neighbours = el("section", { className: "neighbours", id: "neighbours" },
      el("h2", {}, "Nearest papers"), el("p", { className: "status" }, "Loading…"));
    show(
      el("a", { href: "#", className: "back", onclick: (e) => { e.preventDefault(); history.back(); } }, "← back"),
      el("article", { className: "doc", id: "doc", "data-id": doc.id },
        el("h1", {}, titleOf(doc)),
        aboutLine(doc),
        el("p", { className: "cite-line" }, exportLinks([doc.id], "Cite as:")),
        pdfLink(doc) ? el("p", { className: "pdf-line" }, pdfLink(doc)) : null,
        el("p", { className: "text" }, readable(doc.text)),
        factsTable(doc)),
      neighbours);
    highlightMap([doc.id]);
    try {
      const related = await api(`/api/related/${encodeURIComponent(id)}?k=10`);
      if (token !== pending) return;
      neighbours.replaceChildren(el("h2", {}, "Nearest papers"), neighbourList(related.hits));
    } catch (error) {
      if (token === pending) neighbours.replaceChildren(el("h2", {}, "Nearest papers"), errorBox(error));
    }
  }

  function route() {
    const token = ++pending;
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    if (params.get("doc")) return renderDocument(params.get("doc"), token);
    if (params.get("related")) return renderRelated(params.get("related"), token);
    if (params.get("q")) return renderSearch(params, token);
    if (params.has("foryou")) return renderForYou(token);
    if (params.has("new")) return renderNew(params, token);
    document.title = "semsearch";
    show(el("p", { className: "hint" },
      "Type a question and press Enter. Click a title to read the paper and its nearest neighbours."));
    highlightMap([]);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = readForm();
    if (!params.get("q")) { $("q").focus(); return; }
    const hash = "#" + params;
    if (location.hash === hash) route(); // same search again: hashchange would not fire
    else location.hash = hash;
  });
  window.addEventListener("hashchange", route);

  async function loadInfo() {
    try {
      const info = await api("/api/info");
      $("index-info").textContent =
        `${count(info.documents, "paper")} · ${info.model} · ${info.version}`;
    } catch (error) {
      $("index-info").textContent = `index unavailable: ${error.message}`;
    }
  }

  async function loadMap() {
    // The map is optional: without map.js or without a map in this index version the panel stays hidden.
    if (!window.SemsearchMap || typeof window.SemsearchMap.render !== "function") return;
    let data;
    try {
      data = await api("/api/map");
    } catch (_) {
      return;
    }
    const panel = $("map-panel");
    panel.hidden = false;
    try {
      mapHandle = window.SemsearchMap.render($("map"), data, {
        onSelect: (docId) => { location.hash = "#" + new URLSearchParams({ doc: docId }); },
      });
    } catch (error) {
      console.warn("map render failed", error);
      panel.hidden = true;
      mapHandle = null;
      return;
    }
    highlightMap(litIds);
  }

  loadInfo();
  loadTags().then(route);
  loadMap();
})();
