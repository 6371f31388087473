// The judgment viewer: renders the index and the record pages from data/*.js files
// (loaded as scripts, so the site opens from file:// without a server). Every piece of data
// reaches the page through textContent / attributes set as properties: never innerHTML, so
// a completion or a judge's reply that holds markup shows as text.
(function () {
  "use strict";
  var PAGE_ROWS = 50;
  var LLMF = (window.LLMF = window.LLMF || {});
  var chunks = {};
  var shards = {};
  LLMF.manifest = function (m) { LLMF.site = m; };
  LLMF.index = function (n, rows) { chunks[n] = rows; };
  LLMF.shard = function (n, records) { shards[n] = records; };

  function el(tag, props, children) {
    var node = document.createElement(tag);
    Object.keys(props || {}).forEach(function (key) {
      if (key === "text") node.textContent = props[key];
      else if (key === "cls") node.className = props[key];
      else if (key.slice(0, 5) === "data-") node.setAttribute(key, props[key]);
      else node[key] = props[key];
    });
    (children || []).forEach(function (child) {
      if (child !== null && child !== undefined) {
        node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
      }
    });
    return node;
  }
  function text(value) { return value === null || value === undefined ? "—" : String(value); }
  function badge(label, level) { return el("span", { cls: "badge " + (level || ""), text: label }); }
  function pad(n, width) { var s = String(n); while (s.length < width) s = "0" + s; return s; }
  function loadScript(src, done) {
    var script = el("script", { src: src, charset: "utf-8" });
    script.onload = done;
    script.onerror = function () { done(new Error("cannot load " + src)); };
    document.head.appendChild(script);
  }
  function markReady() {
    LLMF.readyMs = performance.now();
    document.documentElement.setAttribute("data-ready", "1");
  }

  // ---- human labels (format: llm_feedback.viewer.labels) ----
  function labelKey() { return "llmf-labels:" + LLMF.site.site_id; }
  function readLabels() {
    try { return JSON.parse(localStorage.getItem(labelKey()) || "{}"); } catch (e) { return {}; }
  }
  function saveLabel(key, label) {
    var labels = readLabels();
    label.annotator = localStorage.getItem("llmf-annotator") || "anonymous";
    // A record the review queue drew: its design and probability go with the label, which
    // the estimates weight it by (llm_feedback.viewer.labels).
    var queue = readQueue(), drawn = queue && queue.items[label.instance_id];
    if (drawn) { label.selection = queue.design; label.selection_probability = drawn.p; }
    labels[key] = label;
    localStorage.setItem(labelKey(), JSON.stringify(labels));
    renderLabelsBar();
  }
  LLMF.labelsJsonl = function () {
    var labels = readLabels();
    return Object.keys(labels).sort().map(function (k) { return JSON.stringify(labels[k]); })
      .join("\n") + (Object.keys(labels).length ? "\n" : "");
  };
  function download() {
    var blob = new Blob([LLMF.labelsJsonl()], { type: "application/x-ndjson" });
    var link = el("a", { href: URL.createObjectURL(blob), download: "labels.jsonl" });
    document.body.appendChild(link);
    link.click();
    link.remove();
  }
  // ---- review queue: the records to label, drawn uniformly at random (what the
  // estimators assume) or with probabilities rising with the judge's uncertainty (each
  // record's probability kept with its labels: active inference weights by it) ----
  var UNIFORM_SHARE = 0.2; // as stats.prediction_powered.select_for_labels
  function queueKey() { return "llmf-queue:" + LLMF.site.site_id; }
  function readQueue() {
    try { return JSON.parse(localStorage.getItem(queueKey()) || "null"); } catch (e) { return null; }
  }
  function seeded(seed) { // mulberry32: a small, seedable uniform generator
    var a = seed >>> 0;
    return function () {
      a = (a + 0x6D2B79F5) >>> 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  // Each record's probability of being drawn: `budget` expected, a share spread uniformly,
  // the rest by uncertainty (a missing value counts as the most unsure seen); a probability
  // past 1 is 1 and its excess goes to the others.
  LLMF.queueProbabilities = function (uncertainty, budget) {
    var n = uncertainty.length, known = uncertainty.filter(function (u) { return u !== null; });
    var top = known.length ? Math.max.apply(null, known) : 1;
    var u = uncertainty.map(function (v) { return v === null ? top : v; });
    var total = u.reduce(function (a, b) { return a + b; }, 0);
    var p = u.map(function (v) {
      var shape = total > 0 ? v / total : 1 / n;
      return budget * ((1 - UNIFORM_SHARE) * shape + UNIFORM_SHARE / n);
    });
    for (var round = 0; round < n; round++) {
      var excess = 0, rest = 0;
      p.forEach(function (v) { if (v > 1) excess += v - 1; else if (v < 1) rest += v; });
      if (excess === 0) break;
      p = p.map(function (v) { return v >= 1 ? 1 : v + excess * v / rest; });
    }
    return p;
  };
  function drawQueue(rows, col, design, budget, seed) {
    var n = rows.length, random = seeded(seed), items = {}, order = [];
    budget = Math.max(1, Math.min(n, budget));
    if (design === "uncertainty") {
      var u = rows.map(function (r) { var v = r[col[LLMF.site.uncertainty]]; return typeof v === "number" ? v : null; });
      var p = LLMF.queueProbabilities(u, budget);
      rows.forEach(function (r, i) { if (random() < p[i]) order.push(i); });
      // The most uncertain first: where a label is worth the most.
      order.sort(function (a, b) { return (u[b] === null ? Infinity : u[b]) - (u[a] === null ? Infinity : u[a]); });
      order.forEach(function (i) { items[rows[i][col.id]] = { p: p[i], shard: rows[i][col.shard] }; });
    } else {
      var all = rows.map(function (r, i) { return i; });
      for (var i = n - 1; i > 0; i--) {
        var j = Math.floor(random() * (i + 1)), t = all[i]; all[i] = all[j]; all[j] = t;
      }
      order = all.slice(0, budget);
      order.forEach(function (k) { items[rows[k][col.id]] = { p: budget / n, shard: rows[k][col.shard] }; });
    }
    return { design: design, seed: seed, budget: budget, order: order.map(function (i) { return rows[i][col.id]; }), items: items };
  }
  function renderQueue(rows, col) {
    var box = document.getElementById("queue");
    if (!box) return;
    box.textContent = "";
    var design = el("select", { id: "queue-design" }, [el("option", { value: "uniform", text: "uniformly at random" })]);
    if (LLMF.site.uncertainty) design.appendChild(el("option", { value: "uncertainty", text: "by the judge's uncertainty" }));
    var budget = el("input", { id: "queue-budget", type: "number", min: "1", value: String(Math.min(50, rows.length)) });
    var seed = el("input", { id: "queue-seed", type: "number", value: "0" });
    var list = el("ol", { id: "queue-items" });
    function show() {
      var queue = readQueue(), labels = readLabels(), done = {};
      list.textContent = "";
      if (!queue) return;
      Object.keys(labels).forEach(function (k) { done[labels[k].instance_id] = true; });
      queue.order.forEach(function (id) {
        var item = queue.items[id];
        list.appendChild(el("li", { "data-id": id, "data-p": String(item.p) }, [
          el("a", { href: "page.html?id=" + encodeURIComponent(id) + "&shard=" + item.shard, text: id }),
          " (p = " + item.p.toFixed(3) + ")", done[id] ? " ✓" : ""]));
      });
    }
    box.appendChild(el("strong", { text: "Review queue " }));
    box.appendChild(el("span", {}, [" draw ", budget, " records ", design, " seed ", seed, " ",
      el("button", { id: "queue-draw", text: "Draw", onclick: function () {
        var queue = drawQueue(rows, col, design.value, Number(budget.value) || 1, Number(seed.value) || 0);
        localStorage.setItem(queueKey(), JSON.stringify(queue));
        show();
      } })]));
    box.appendChild(list);
    show();
  }
  function renderLabelsBar() {
    var bar = document.getElementById("labels-bar");
    if (!bar) return;
    bar.textContent = "";
    var who = el("input", { id: "annotator", placeholder: "annotator",
      value: localStorage.getItem("llmf-annotator") || "" });
    who.onchange = function () { localStorage.setItem("llmf-annotator", who.value); };
    var n = Object.keys(readLabels()).length;
    bar.appendChild(el("label", {}, ["Reviewer ", who]));
    bar.appendChild(el("button", { id: "download-labels", text: "Download labels (" + n + ")",
      onclick: download }));
  }
  function pairLabeler(instance, question, options) {
    // options: [{ident, label, response, model}], at least two.
    var box = el("div", { cls: "labeler" });
    function pick(id, chosen) {
      var select = el("select", { cls: id });
      options.forEach(function (o, i) {
        select.appendChild(el("option", { value: String(i), text: o.label, selected: i === chosen }));
      });
      return select;
    }
    var a = pick("pair-a", 0), b = pick("pair-b", 1);
    box.appendChild(el("strong", { text: "Which is better? " }));
    box.appendChild(el("span", {}, ["A ", a, " B ", b, " "]));
    ["A", "B", "tie"].forEach(function (verdict) {
      box.appendChild(el("button", { text: verdict === "tie" ? "tie" : verdict + " is better",
        "data-verdict": verdict, onclick: function () {
          var x = options[Number(a.value)], y = options[Number(b.value)];
          if (x === y) { alert("pick two different responses"); return; }
          saveLabel("p|" + instance + "|" + x.ident + "|" + y.ident, {
            instance_id: instance, question: question, response_a: x.response,
            response_b: y.response, model_a: x.model, model_b: y.model, label: verdict });
        } }));
    });
    return box;
  }
  function scoreLabeler(instance, question, option, aspects) {
    // aspects: the names a rating may be given for (annotate); none: one score a response.
    var input = el("input", { type: "number", step: "any", cls: "gold-score",
      "data-ident": option.ident });
    var aspect = null;
    if (aspects && aspects.length) {
      aspect = el("select", { cls: "gold-aspect", "data-ident": option.ident });
      aspect.appendChild(el("option", { value: "", text: "overall" }));
      aspects.forEach(function (name) { aspect.appendChild(el("option", { value: name, text: name })); });
    }
    return el("div", { cls: "labeler" }, ["Your score ", aspect, aspect ? " " : null, input, " ", el("button", {
      text: "save score", cls: "save-score", onclick: function () {
        if (input.value === "" || isNaN(Number(input.value))) return;
        var label = { instance_id: instance, question: question, response: option.response,
          model: option.model, gold_score: Number(input.value) };
        var key = "s|" + instance + "|" + option.ident;
        if (aspect && aspect.value) { label.aspect = aspect.value; key += "|" + aspect.value; }
        saveLabel(key, label);
      } })]);
  }

  // ---- index state, kept in the URL's hash: a visit to a record page and back (its
  // "← index" link or the browser's back button) finds the filters, search, order and page
  // as they were ----
  function readState(site) {
    var hash = new URLSearchParams(location.hash.slice(1));
    var state = { q: hash.get("q") || "", scope: hash.get("in") || "", sort: hash.get("sort") || "",
      dir: hash.get("dir") === "desc" ? "desc" : "asc",
      page: Math.max(0, (parseInt(hash.get("page"), 10) || 1) - 1), filters: {} };
    site.filters.forEach(function (f) {
      var value = hash.get("f." + f.column);
      if (value !== null) state.filters[f.column] = f.type === "flag" ? value === "1" : value;
    });
    if (site.display.indexOf(state.sort) < 0) state.sort = "";
    if (!site.search || site.search.fields.indexOf(state.scope) < 0) state.scope = "";
    return state;
  }
  function stateHash(state) {
    var hash = new URLSearchParams();
    if (state.q) hash.set("q", state.q);
    if (state.scope) hash.set("in", state.scope);
    Object.keys(state.filters).forEach(function (name) {
      var value = state.filters[name];
      if (value === true) hash.set("f." + name, "1");
      else if (value) hash.set("f." + name, value);
    });
    if (state.sort) { hash.set("sort", state.sort); hash.set("dir", state.dir); }
    if (state.page) hash.set("page", String(state.page + 1));
    return hash.toString();
  }
  function busy(on) {
    if (on) document.documentElement.setAttribute("data-busy", "1");
    else document.documentElement.removeAttribute("data-busy");
  }

  // ---- full-text search (index format: llm_feedback.viewer.site) ----
  var searchFiles = {}, requested = {};
  LLMF.search = function (chunk, bucket, postings) { searchFiles[chunk + "-" + bucket] = postings; };
  function need(src) {
    if (!requested[src]) {
      requested[src] = new Promise(function (resolve) {
        loadScript(src, function (error) { resolve(error instanceof Error ? error : null); });
      });
    }
    return requested[src];
  }
  function queryTokens(query, maxChars) {
    return (query.toLowerCase().match(/[\p{L}\p{N}]+/gu) || []).map(function (token) {
      return Array.from(token).slice(0, maxChars).join("");
    });
  }
  // A query token finds the tokens it begins; one of one character, only itself.
  function tokenMatches(token, query) {
    return token === query || (query.length > 1 && token.lastIndexOf(query, 0) === 0);
  }
  // Rows (by index position) holding every query token in a field of `scopeMask`:
  // { hits: Uint8Array, failed: files that did not load }.
  function searchRows(site, tokens, scopeMask, total) {
    var spec = site.search, unit = 1 << spec.fields.length, loads = [];
    function bucket(token) { return token.codePointAt(0) % spec.buckets; }
    tokens.forEach(function (token) {
      for (var c = 0; c < site.n_chunks; c++) {
        loads.push(need("data/search-" + pad(c, 4) + "-" + pad(bucket(token), 2) + ".js"));
      }
    });
    return Promise.all(loads).then(function (errors) {
      var hits = null;
      tokens.forEach(function (query) {
        var found = new Uint8Array(total);
        for (var c = 0; c < site.n_chunks; c++) {
          var postings = searchFiles[c + "-" + bucket(query)] || {}, base = c * site.chunk_rows;
          Object.keys(postings).forEach(function (token) {
            if (!tokenMatches(token, query)) return;
            var code = 0, steps = postings[token].split(",");
            for (var i = 0; i < steps.length; i++) {
              code += parseInt(steps[i], 16);
              if (code & scopeMask) found[base + Math.floor(code / unit)] = 1;
            }
          });
        }
        if (hits) for (var i = 0; i < total; i++) hits[i] &= found[i];
        else hits = found;
      });
      return { hits: hits, failed: errors.filter(Boolean).length };
    });
  }

  // ---- index ----
  function indexPage() {
    var site = LLMF.site, pending = site.n_chunks, rows = [];
    if (!pending) return renderIndex(rows);
    for (var i = 0; i < site.n_chunks; i++) {
      loadScript("data/index-" + pad(i, 4) + ".js", function () {
        if (--pending === 0) {
          for (var c = 0; c < site.n_chunks; c++) rows = rows.concat(chunks[c] || []);
          renderIndex(rows);
        }
      });
    }
  }
  // A cell's sort key: numbers as they are, yes/no as 1/0, a list by its length.
  function sortKey(value) {
    if (value === null || value === undefined) return null;
    if (typeof value === "boolean") return value ? 1 : 0;
    if (Array.isArray(value)) return value.length;
    return typeof value === "string" ? value.toLowerCase() : value;
  }
  function renderIndex(rows) {
    var site = LLMF.site, col = {}, state = readState(site);
    var hits = null, searchNote = "", searchSeq = 0, timer = null, shown = [];
    site.columns.forEach(function (name, i) { col[name] = i; });
    renderQueue(rows, col);
    function heading(name) { return (site.headings[name] || [name])[0]; }
    function remember() {
      var hash = stateHash(state);
      history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
    }

    var filters = document.getElementById("filters");
    site.filters.forEach(function (f) {
      var control, want = state.filters[f.column];
      if (f.type === "flag") {
        control = el("input", { type: "checkbox", "data-filter": f.column, checked: !!want });
        control.onchange = function () { state.filters[f.column] = control.checked; update(); };
      } else {
        control = el("select", { "data-filter": f.column }, [el("option", { value: "", text: "(any)" })]);
        (site.values[f.column] || []).forEach(function (v) {
          control.appendChild(el("option", { value: v, text: v, selected: v === want }));
        });
        control.onchange = function () { state.filters[f.column] = control.value; update(); };
      }
      filters.appendChild(el("label", {}, [f.label + " ", control]));
    });
    var search = el("input", { id: "search", type: "search", value: state.q,
      placeholder: site.search ? "words in any text" : "search id or text" });
    search.oninput = function () {
      state.q = search.value;
      busy(true);
      clearTimeout(timer);
      timer = setTimeout(function () { find(update); }, 200);
    };
    var searchBox = el("label", {}, ["search ", search]);
    if (site.search) {
      var scope = el("select", { id: "search-in" }, [el("option", { value: "", text: "everywhere" })]);
      site.search.fields.forEach(function (name) {
        scope.appendChild(el("option", { value: name, text: "in " + name, selected: name === state.scope }));
      });
      scope.onchange = function () { state.scope = scope.value; busy(true); find(update); };
      searchBox.appendChild(scope);
    }
    filters.appendChild(searchBox);

    var sorting = document.getElementById("sorting");
    sorting.appendChild(document.createTextNode("order: "));
    site.presets.concat([["index order", "", "asc"]]).forEach(function (preset) {
      sorting.appendChild(el("button", { cls: "preset", text: preset[0], "data-sort": preset[1],
        onclick: function () { state.sort = preset[1]; state.dir = preset[2]; update(); } }));
    });
    var headRow = el("tr", {}, site.display.map(function (name) {
      var hint = (site.headings[name] || [])[1];
      return el("th", { "data-column": name, title: hint || "" }, [el("button", { cls: "sort",
        text: heading(name), onclick: function () {
          var first = site.descending.indexOf(name) >= 0 ? "desc" : "asc";
          if (state.sort !== name) { state.sort = name; state.dir = first; }
          else if (state.dir === first) state.dir = first === "asc" ? "desc" : "asc";
          else state.sort = "";
          update();
        } })]);
    }));
    document.querySelector("#rows thead").appendChild(headRow);

    function matches(row) {
      for (var i = 0; i < site.filters.length; i++) {
        var f = site.filters[i], want = state.filters[f.column], value = row[col[f.column]];
        if (f.type === "flag") { if (want && !value) return false; }
        else if (want && (Array.isArray(value) ? value.indexOf(want) < 0 : value !== want)) return false;
      }
      if (!site.search && state.q) {
        var hay = (row[col.id] + "\n" + row[col.text]).toLowerCase();
        if (hay.indexOf(state.q.toLowerCase()) < 0) return false;
      }
      return true;
    }
    // Runs the search of state.q, then `done` (the latest search only).
    function find(done) {
      var seq = ++searchSeq;
      var tokens = site.search ? queryTokens(state.q, site.search.max_token_chars) : [];
      if (!tokens.length) { hits = null; searchNote = ""; done(); return; }
      var fields = site.search.fields, mask = state.scope ? 1 << fields.indexOf(state.scope) : (1 << fields.length) - 1;
      busy(true);
      searchRows(site, tokens, mask, rows.length).then(function (result) {
        if (seq !== searchSeq) return;
        hits = result.hits;
        searchNote = result.failed ? " · " + result.failed + " search files did not load" : "";
        done();
      });
    }
    function update() { state.page = 0; refresh(); }
    function refresh() {
      shown = [];
      for (var i = 0; i < rows.length; i++) if ((!hits || hits[i]) && matches(rows[i])) shown.push(i);
      if (state.sort) {
        var c = col[state.sort], sign = state.dir === "desc" ? -1 : 1;
        var keys = shown.map(function (i) { return sortKey(rows[i][c]); });
        var at = shown.map(function (_, k) { return k; });
        at.sort(function (a, b) {
          var x = keys[a], y = keys[b];
          if (x === null || y === null) return x === y ? a - b : (x === null ? 1 : -1);
          return x < y ? -sign : x > y ? sign : a - b;  // missing values last; ties in index order
        });
        shown = at.map(function (k) { return shown[k]; });
      }
      draw();
      busy(false);
    }
    function pager(nav, pages) {
      nav.textContent = "";
      function go(page) {
        state.page = Math.min(Math.max(0, page), pages - 1);
        draw();
        window.scrollTo(0, 0);
      }
      var top = nav.id === "pager";
      function button(id, label, page, disabled) {
        nav.appendChild(el("button", { id: top ? id : "", cls: id, text: label, disabled: disabled,
          onclick: function () { go(page); } }));
      }
      button("first", "« first", 0, state.page === 0);
      button("prev", "← previous", state.page - 1, state.page === 0);
      if (top) {
        var jump = el("input", { id: "page-jump", type: "number", min: 1, max: pages, value: state.page + 1 });
        jump.onchange = function () { var n = parseInt(jump.value, 10); if (n > 0) go(n - 1); };
        nav.appendChild(el("label", {}, ["page ", jump, " of " + pages]));
      } else nav.appendChild(el("span", { text: "page " + (state.page + 1) + " of " + pages }));
      button("next", "next →", state.page + 1, state.page + 1 >= pages);
      button("last", "last »", pages - 1, state.page + 1 >= pages);
    }
    function cell(name, row) {
      var value = row[col[name]];
      if (name === "id") {
        var query = new URLSearchParams({ id: row[col.id], shard: row[col.shard] });
        return el("td", {}, [el("a", { href: "page.html?" + query.toString() + "#" + stateHash(state), text: value })]);
      }
      if (name === "flags") {
        return el("td", { cls: "flags" }, (value || []).map(function (flag) {
          return badge(flag, flag.lastIndexOf("fix:", 0) === 0 ? "warn" : "bad");
        }));
      }
      if (typeof value === "number") return el("td", { cls: "number", text: String(value) });
      if (Array.isArray(value)) value = value.join(", ");
      else if (value === true || value === false) value = value ? "yes" : "";
      return el("td", { cls: name === "text" ? "snippet" : "", text: text(value) });
    }
    function draw() {
      var pages = Math.max(1, Math.ceil(shown.length / PAGE_ROWS));
      state.page = Math.min(state.page, pages - 1);
      remember();
      var body = document.querySelector("#rows tbody");
      body.textContent = "";
      shown.slice(state.page * PAGE_ROWS, (state.page + 1) * PAGE_ROWS).forEach(function (i) {
        body.appendChild(el("tr", { cls: "row" }, site.display.map(function (name) { return cell(name, rows[i]); })));
      });
      headRow.childNodes.forEach(function (th) {
        var name = th.getAttribute("data-column"), on = name === state.sort;
        th.setAttribute("aria-sort", on ? (state.dir === "asc" ? "ascending" : "descending") : "none");
        th.firstChild.textContent = heading(name) + (on ? (state.dir === "asc" ? " ▲" : " ▼") : "");
      });
      sorting.querySelectorAll("button").forEach(function (b) {
        var preset = site.presets.filter(function (p) { return p[0] === b.textContent; })[0];
        b.classList.toggle("chosen", preset ? preset[1] === state.sort && preset[2] === state.dir : !state.sort);
      });
      document.getElementById("count").textContent =
        shown.length + " of " + rows.length + " " + site.unit + " (page " + (state.page + 1) + " of " + pages + ")" + searchNote;
      pager(document.getElementById("pager"), pages);
      pager(document.getElementById("pager-bottom"), pages);
    }
    find(function () { refresh(); markReady(); });
  }

  // ---- record pages ----
  // The index's state travels in the hash: "← index" goes back to it, and the words
  // searched for are marked.
  function recordPage() {
    var query = new URLSearchParams(location.search);
    var id = query.get("id"), shard = Number(query.get("shard"));
    document.getElementById("back").href = "index.html" + location.hash;
    loadScript("data/shard-" + pad(shard, 5) + ".js", function () {
      var record = (shards[shard] || {})[id];
      var main = document.getElementById("record");
      main.textContent = "";
      document.getElementById("title").textContent = text(id);
      if (!record) main.appendChild(el("p", { text: "no record " + id + " in shard " + shard }));
      else if (LLMF.site.kind === "feedback") feedbackRecord(main, record);
      else evaluationRecord(main, record);
      var searched = new URLSearchParams(location.hash.slice(1)).get("q");
      if (searched && LLMF.site.search) {
        var marks = markWords(main, queryTokens(searched, LLMF.site.search.max_token_chars));
        document.getElementById("found").textContent =
          marks.length + " place" + (marks.length === 1 ? "" : "s") + " matching “" + searched + "”";
        if (marks.length) marks[0].scrollIntoView({ block: "center" });
      }
      markReady();
    });
  }
  // Wraps the words of the page's texts that a query token finds in <mark> (text nodes
  // split, never markup parsed); the marks in document order.
  function markWords(root, tokens) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), nodes = [], node, marks = [];
    while ((node = walker.nextNode())) if (node.parentNode.closest(".text")) nodes.push(node);
    nodes.forEach(function (node) {
      var value = node.nodeValue, last = 0, words = /[\p{L}\p{N}]+/gu, m, parts = null;
      while ((m = words.exec(value)) !== null) {
        var word = m[0].toLowerCase();
        if (!tokens.some(function (token) { return tokenMatches(word, token); })) continue;
        parts = parts || document.createDocumentFragment();
        parts.appendChild(document.createTextNode(value.slice(last, m.index)));
        marks.push(parts.appendChild(el("mark", { text: m[0] })));
        last = m.index + m[0].length;
      }
      if (parts) {
        parts.appendChild(document.createTextNode(value.slice(last)));
        node.parentNode.replaceChild(parts, node);
      }
    });
    return marks;
  }
  function statusBadge(status) {
    return badge(text(status), status === "ok" || status === "exact_match" ? "" : "bad");
  }
  // "Text 3" in a rationale means the completion shown third in that call.
  function mappedRationale(rationale, shownAt, completions) {
    var node = el("div", { cls: "text rationale" }), last = 0, pattern = /Text\s*(\d+)/gi, m;
    rationale = rationale || "";
    while ((m = pattern.exec(rationale)) !== null) {
      var idx = shownAt[Number(m[1]) - 1];
      node.appendChild(document.createTextNode(rationale.slice(last, m.index + m[0].length)));
      if (idx !== undefined) {
        node.appendChild(el("span", { cls: "mapped", "data-completion": idx,
          text: " [= #" + idx + " " + completions[idx].model + "]" }));
      }
      last = m.index + m[0].length;
    }
    node.appendChild(document.createTextNode(rationale.slice(last)));
    return node;
  }
  function feedbackRecord(main, r) {
    var byIdx = {}, aspectNames = [];
    r.completions.forEach(function (c) { byIdx[c.idx] = c; });
    r.aspects.forEach(function (a) { if (aspectNames.indexOf(a[0]) < 0) aspectNames.push(a[0]); });
    main.appendChild(el("p", {}, [badge("source: " + r.source)]));
    main.appendChild(el("h2", { text: "Instruction" }));
    main.appendChild(el("div", { cls: "text", id: "instruction", text: r.instruction }));
    main.appendChild(el("h2", { text: "Completions" }));
    main.appendChild(el("div", { cls: "grid" }, r.completions.map(function (c) {
      return el("div", { cls: "card completion", "data-completion": c.idx }, [
        el("h3", { text: "#" + c.idx + " " + c.model }),
        el("p", {}, [badge("principle: " + text(c.principle)),
          c.injection ? badge("suspected injection", "bad") : null]),
        el("div", { cls: "text response", text: c.response }),
        el("p", {}, ["overall ", el("strong", { cls: "overall", text: text(c.overall) }),
          " → fixed ", el("strong", { text: text(c.fixed) }), " · fine-grained ",
          text(c.fine), " ", badge("fix: " + text(c.fix_action), c.fix_action && c.fix_action !== "kept" ? "warn" : "")]),
        el("p", {}, ["critique ", statusBadge(c.critique_status)]),
        el("div", { cls: "text critique", text: c.critique || "" }),
        scoreLabeler(r.id, r.instruction, { ident: String(c.idx), response: c.response, model: c.model },
          aspectNames),
      ]);
    })));
    if (r.completions.length > 1) {
      main.appendChild(pairLabeler(r.id, r.instruction, r.completions.map(function (c) {
        return { ident: String(c.idx), label: "#" + c.idx + " " + c.model, response: c.response, model: c.model };
      })));
    }
    // aspects: [aspect, shuffle, position, completion_idx, rating, is_na, rationale, status, injection]
    var aspects = {}, order = [];
    r.aspects.forEach(function (a) {
      if (!aspects[a[0]]) { aspects[a[0]] = {}; order.push(a[0]); }
      (aspects[a[0]][a[1]] = aspects[a[0]][a[1]] || []).push(a);
    });
    order.forEach(function (aspect) {
      main.appendChild(el("h2", { text: "Aspect: " + aspect }));
      var shuffles = Object.keys(aspects[aspect]).map(Number).sort(function (x, y) { return x - y; });
      var table = el("table", { cls: "aspect", "data-aspect": aspect });
      table.appendChild(el("tr", {}, [el("th", { text: "completion" })].concat(shuffles.map(function (s) {
        return el("th", { text: "shuffle " + s });
      }))));
      var cells = {};
      shuffles.forEach(function (s) {
        var shownAt = [];
        aspects[aspect][s].forEach(function (a) { shownAt[a[2]] = a[3]; });
        aspects[aspect][s].forEach(function (a) {
          var rating = a[5] ? "N/A" : text(a[4]);
          (cells[a[3]] = cells[a[3]] || {})[s] = el("td", { cls: "rating-cell",
            "data-completion": a[3], "data-shuffle": s, "data-shown": a[2] + 1 }, [
            el("span", { cls: "shown", text: "shown as Text " + (a[2] + 1) + ": " }),
            el("strong", { cls: "rating", text: rating }), " ", statusBadge(a[7]),
            a[8] ? badge("suspected injection", "bad") : null,
            mappedRationale(a[6], shownAt, byIdx),
          ]);
        });
      });
      r.completions.forEach(function (c) {
        table.appendChild(el("tr", {}, [el("th", { text: "#" + c.idx + " " + c.model })].concat(
          shuffles.map(function (s) { return (cells[c.idx] || {})[s] || el("td", { text: "—" }); }))));
      });
      main.appendChild(table);
    });
  }
  function evaluationRecord(main, r) {
    main.appendChild(el("p", {}, [badge("category: " + text(r.category))]));
    if (r.prior_question) {
      main.appendChild(el("h2", { text: "First turn" }));
      main.appendChild(el("div", { cls: "text", text: r.prior_question }));
    }
    main.appendChild(el("h2", { text: "Question" }));
    main.appendChild(el("div", { cls: "text", id: "instruction", text: text(r.question) }));
    if (r.reference) {
      main.appendChild(el("h2", { text: "Reference (gold)" }));
      main.appendChild(el("div", { cls: "text gold", text: r.reference }));
    }
    if (r.rows.length) {
      main.appendChild(el("h2", { text: "Responses" }));
      main.appendChild(el("div", { cls: "grid" }, r.rows.map(function (row, i) {
        return el("div", { cls: "card judgment" }, [
          el("h3", { text: row.model + " (turn " + row.turn + ", replicate " + row.replicate + ")" }),
          el("div", { cls: "text response", text: text(row.response) }),
          el("p", {}, [badge(text(row.mode)), "score ", el("strong", { text: text(row.score) }),
            row.correct === null ? null : badge(row.correct ? "correct" : "wrong", row.correct ? "" : "warn"),
            " ", statusBadge(row.status),
            row.recorded_score === null ? null : badge("gold score: " + row.recorded_score)]),
          el("div", { cls: "text reasoning", text: text(row.reasoning) }),
          scoreLabeler(r.id, r.question, { ident: row.model + "|" + row.turn + "|" + row.replicate + "|" + i,
            response: row.response, model: row.model }),
        ]);
      })));
    }
    if (r.pairs.length) main.appendChild(el("h2", { text: "Pairwise judgments" }));
    r.pairs.forEach(function (p) {
      main.appendChild(el("div", { cls: "card pair" }, [
        el("h3", { text: p.model_a + " vs " + p.model_b + " (turn " + p.turn + ", replicate " + p.replicate + ")" }),
        el("div", { cls: "grid" }, [
          el("div", {}, [el("strong", { text: "A: " + p.model_a }), el("div", { cls: "text", text: text(p.response_a) })]),
          el("div", {}, [el("strong", { text: "B: " + p.model_b }), el("div", { cls: "text", text: text(p.response_b) })]),
        ]),
        el("p", {}, ["A shown first: ", el("strong", { cls: "verdict-a-first", text: text(p.verdict_a_first) }),
          " · B shown first: ", el("strong", { cls: "verdict-b-first", text: text(p.verdict_b_first) }),
          " · outcome ", el("strong", { text: text(p.outcome) }), " ",
          p.consistent === false ? badge("orders disagree", "warn") : null, statusBadge(p.status)]),
        el("details", {}, [el("summary", { text: "judge replies (A first, B first)" }),
          el("div", { cls: "text", text: text(p.raw_a_first) }), el("div", { cls: "text", text: text(p.raw_b_first) })]),
        pairLabeler(r.id, r.question, [
          { ident: p.model_a, label: "A " + p.model_a, response: p.response_a, model: p.model_a },
          { ident: p.model_b, label: "B " + p.model_b, response: p.response_b, model: p.model_b }]),
      ]));
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.getElementById("title").textContent = LLMF.site.title;
    var summary = document.getElementById("summary");
    if (summary) summary.textContent = LLMF.site.summary;
    renderLabelsBar();
    if (document.body.getAttribute("data-page") === "index") indexPage();
    else recordPage();
  });
})();
