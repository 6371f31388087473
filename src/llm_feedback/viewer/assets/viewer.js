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
  function renderIndex(rows) {
    var site = LLMF.site, col = {};
    site.columns.forEach(function (name, i) { col[name] = i; });
    var state = { page: 0, search: "", filters: {} };
    var filters = document.getElementById("filters");
    site.filters.forEach(function (f) {
      var control;
      if (f.type === "flag") {
        control = el("input", { type: "checkbox", "data-filter": f.column });
        control.onchange = function () { state.filters[f.column] = control.checked; update(); };
      } else {
        control = el("select", { "data-filter": f.column }, [el("option", { value: "", text: "(any)" })]);
        (site.values[f.column] || []).forEach(function (v) {
          control.appendChild(el("option", { value: v, text: v }));
        });
        control.onchange = function () { state.filters[f.column] = control.value; update(); };
      }
      filters.appendChild(el("label", {}, [f.label + " ", control]));
    });
    var search = el("input", { id: "search", type: "search", placeholder: "search id or text" });
    search.oninput = function () { state.search = search.value.toLowerCase(); update(); };
    filters.appendChild(el("label", {}, ["search ", search]));
    var head = document.querySelector("#rows thead");
    head.appendChild(el("tr", {}, site.display.map(function (name) { return el("th", { text: name }); })));
    var shown = rows;
    function matches(row) {
      for (var i = 0; i < site.filters.length; i++) {
        var f = site.filters[i], want = state.filters[f.column], value = row[col[f.column]];
        if (f.type === "flag") { if (want && !value) return false; }
        else if (want && (Array.isArray(value) ? value.indexOf(want) < 0 : value !== want)) return false;
      }
      if (state.search) {
        var hay = (row[col.id] + "\n" + row[col.text]).toLowerCase();
        if (hay.indexOf(state.search) < 0) return false;
      }
      return true;
    }
    function update() { state.page = 0; shown = rows.filter(matches); draw(); }
    function draw() {
      var body = document.querySelector("#rows tbody");
      body.textContent = "";
      var pages = Math.max(1, Math.ceil(shown.length / PAGE_ROWS));
      shown.slice(state.page * PAGE_ROWS, (state.page + 1) * PAGE_ROWS).forEach(function (row) {
        body.appendChild(el("tr", { cls: "row" }, site.display.map(function (name) {
          var value = row[col[name]];
          if (name === "id") {
            var query = new URLSearchParams({ id: row[col.id], shard: row[col.shard] });
            return el("td", {}, [el("a", { href: "page.html?" + query.toString(), text: value })]);
          }
          if (Array.isArray(value)) value = value.join(", ");
          else if (value === true || value === false) value = value ? "yes" : "";
          return el("td", { text: text(value) });
        })));
      });
      document.getElementById("count").textContent =
        shown.length + " of " + rows.length + " " + site.unit + " (page " + (state.page + 1) + " of " + pages + ")";
      var pager = document.getElementById("pager");
      pager.textContent = "";
      pager.appendChild(el("button", { id: "prev", text: "← previous", disabled: state.page === 0,
        onclick: function () { state.page--; draw(); } }));
      pager.appendChild(el("button", { id: "next", text: "next →", disabled: state.page + 1 >= pages,
        onclick: function () { state.page++; draw(); } }));
    }
    update();
    markReady();
  }

  // ---- record pages ----
  function recordPage() {
    var query = new URLSearchParams(location.search);
    var id = query.get("id"), shard = Number(query.get("shard"));
    loadScript("data/shard-" + pad(shard, 5) + ".js", function () {
      var record = (shards[shard] || {})[id];
      var main = document.getElementById("record");
      main.textContent = "";
      document.getElementById("title").textContent = text(id);
      if (!record) main.appendChild(el("p", { text: "no record " + id + " in shard " + shard }));
      else if (LLMF.site.kind === "feedback") feedbackRecord(main, record);
      else evaluationRecord(main, record);
      markReady();
    });
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
