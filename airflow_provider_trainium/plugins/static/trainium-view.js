/* The Trainium view: the job list, or one job's charts when the URL names a DAG run (?dag_id=&run_id=); a job
 * without a stream, or a DAG run without a job, gets the help the server sends (how to get curves).
 * Every chart keeps the series it was given in its data-series attribute (JSON), so tests and users can
 * check what is plotted against the metrics stream. While the run's task has not ended, the run page asks
 * again every REFRESH_MS and redraws in place (body[data-refreshes] counts the redraws). */
(function () {
  "use strict";
  const params = new URLSearchParams(window.location.search);
  const main = document.getElementById("main");
  const status = document.getElementById("status");
  const DASH = "\u2014";
  const REFRESH_MS = 5000;
  //  Task states after which nothing more is written (Airflow's finished states).
  const ENDED = new Set(["success", "failed", "skipped", "upstream_failed", "removed"]);
  const COLORS = ["#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#0ea5e9", "#84cc16", "#ec4899"];

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) node.setAttribute(k, v);
    }
    for (const c of [].concat(children || [])) {
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  async function getJson(path) {
    const resp = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!resp.ok) {
      const body = await resp.text();
      throw new Error(resp.status + " " + body);
    }
    return resp.json();
  }

  function num(v, digits) {
    return typeof v === "number" && isFinite(v) ? v.toFixed(digits) : DASH;
  }

  function duration(s) {
    if (typeof s !== "number") return DASH;
    if (s < 90) return s.toFixed(0) + " s";
    if (s < 5400) return (s / 60).toFixed(1) + " min";
    return (s / 3600).toFixed(2) + " h";
  }

  function cost(c) {
    if (!c || typeof c.usd !== "number") return DASH;
    const usd = "$" + c.usd.toFixed(2);
    return c.is_estimate ? usd + " (est. $" + Number(c.estimate_usd).toFixed(2) + ")" : usd;
  }

  function layout(l) {
    if (!l || !l.instance_type) return DASH;
    const procs = l.processes_per_node ? " \u00d7 " + l.processes_per_node + " proc" : "";
    return l.instance_type + " \u00d7 " + (l.nodes || 1) + procs + (l.compute ? " (" + l.compute + ")" : "");
  }

  function version(m) {
    return m && m.name ? m.name + " v" + m.version : DASH;
  }

  function runHref(r) {
    const q = new URLSearchParams({ dag_id: r.dag_id, run_id: r.run_id, task_id: r.task_id });
    if (r.map_index !== -1) q.set("map_index", r.map_index);
    return "?" + q.toString();
  }

  function stateBadge(state) {
    return el("span", { class: "state state-" + (state || "none") }, state || "none");
  }

  function runsTable(runs, withLinks) {
    const head = ["DAG", "run", "task", "operator", "state", "layout", "duration", "cost", "final loss", "accuracy", "version"];
    const rows = runs.map((r) =>
      el("tr", { "data-testid": "run-row", "data-dag-id": r.dag_id, "data-run-id": r.run_id, "data-task-id": r.task_id }, [
        el("td", {}, r.dag_id),
        el("td", {}, withLinks ? el("a", { href: runHref(r) }, r.run_id) : r.run_id),
        el("td", {}, r.task_id),
        el("td", { "data-col": "operator" }, r.operator_name || DASH),
        el("td", {}, stateBadge(r.state)),
        el("td", {}, layout(r.layout)),
        el("td", { class: "num" }, duration(r.duration_s)),
        el("td", { class: "num", "data-col": "cost" }, cost(r.cost)),
        el("td", { class: "num" }, num(r.final.loss, 4)),
        el("td", { class: "num" }, num(r.final.accuracy, 4)),
        el("td", { "data-col": "version" }, version(r.model)),
      ])
    );
    return el("table", { "data-testid": "runs" }, [el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))), el("tbody", {}, rows)]);
  }

  /* Several {x, y} series on one chart: uPlot wants one shared, ascending x; gaps are null. */
  function align(named) {
    const xs = Array.from(new Set(named.flatMap((s) => s.x.filter((x) => x !== null)))).sort((a, b) => a - b);
    const index = new Map(xs.map((x, i) => [x, i]));
    const ys = named.map((s) => {
      const y = new Array(xs.length).fill(null);
      s.x.forEach((x, i) => {
        if (index.has(x)) y[index.get(x)] = s.y[i];
      });
      return y;
    });
    return [xs].concat(ys);
  }

  /* yRange: [min, max] fixes the y axis (percent charts: 0-100), else uPlot fits it to the data. */
  function chart(key, title, xLabel, named, yRange) {
    const shown = named.filter((s) => s.y.some((v) => v !== null));
    const box = el("div", { class: "chart", "data-chart": key }, el("h3", {}, title));
    const plotted = {};
    shown.forEach((s) => (plotted[s.label] = { x: s.x, y: s.y }));
    box.setAttribute("data-series", JSON.stringify(plotted));
    if (yRange) box.setAttribute("data-y-range", JSON.stringify(yRange));
    if (!shown.length) {
      box.append(el("p", { class: "empty" }, "nothing recorded"));
      return box;
    }
    const draw = () => {
      const opts = {
        width: Math.max(360, box.clientWidth - 16),
        height: 240,
        scales: yRange ? { x: { time: false }, y: { range: yRange } } : { x: { time: false } },
        axes: [{ label: xLabel }, { size: 64 }],
        series: [{ label: xLabel }].concat(
          shown.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: i ? 1 : 2, spanGaps: true }))
        ),
      };
      new uPlot(opts, align(shown), box);
      box.setAttribute("data-rendered", "true");
    };
    requestAnimationFrame(draw);
    return box;
  }

  /* The summary's final loss, else the last loss the stream recorded (MNIST's summary reports accuracy only). */
  function finalLoss(run, series) {
    if (typeof run.final.loss === "number") return num(run.final.loss, 4);
    const ys = series ? series.loss.y.filter((v) => v !== null) : [];
    return ys.length ? num(ys[ys.length - 1], 4) + " (last streamed)" : DASH;
  }

  function summary(run, series, stream) {
    const items = [
      ["DAG run", el("a", { href: "/dags/" + encodeURIComponent(run.dag_id) + "/runs/" + encodeURIComponent(run.run_id), target: "_top" }, run.dag_id + " / " + run.run_id)],
      ["task", run.task_id + " (try " + run.try_number + ")"],
      ["state", stateBadge(run.state)],
      ["layout", layout(run.layout)],
      ["duration", duration(run.duration_s)],
      ["cost", cost(run.cost)],
      ["price", run.cost ? "$" + run.cost.price_per_node_hour_usd + " per node-hour (" + run.cost.price_date + ")" : DASH],
      ["final loss", finalLoss(run, series)],
      ["accuracy", num(run.final.accuracy, 4)],
      ["registered", version(run.model)],
      ["output", run.output_uri || (stream && stream.location) || DASH],
    ];
    if (run.xcom_hidden) items.push(["XComs", "hidden: you may not read this DAG's XComs"]);
    return el("dl", { class: "summary", "data-testid": "summary" }, items.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  function label(entry, current) {
    return current ? "this run" : version(entry.run.model);
  }

  function runCharts(detail) {
    const s = detail.series;
    const ranges = s.y_range || {};
    const others = detail.previous.filter((p) => p.series);
    const loss = [{ label: "this run", x: s.loss.x, y: s.loss.y }].concat(
      others.map((p) => ({ label: label(p, false), x: p.series.loss.x, y: p.series.loss.y }))
    );
    const tput = [
      { label: "samples/s", x: s.throughput.x, y: s.throughput.samples_per_s },
      { label: "tokens/s", x: s.throughput.x, y: s.throughput.tokens_per_s },
    ];
    const mfu = [{ label: "this run", x: s.mfu.x, y: s.mfu.y }].concat(
      others.map((p) => ({ label: label(p, false), x: p.series.mfu.x, y: p.series.mfu.y }))
    );
    const cores = Object.entries(s.neuroncores.cores).map(([name, y]) => ({ label: name, x: s.neuroncores.x, y: y }));
    const hosts = Object.entries(s.host.cpu).map(([name, y]) => ({ label: name + " CPU", x: s.host.x, y: y }));
    const evals = [
      { label: "eval loss", x: s.eval.x, y: s.eval.loss },
      { label: "eval accuracy", x: s.eval.x, y: s.eval.accuracy },
    ];
    return el("div", { class: "charts" }, [
      chart("loss", "Loss", "step", loss),
      chart("throughput", "Throughput", "seconds", tput),
      chart("mfu", "MFU", "step", mfu),
      chart("neuroncores", "NeuronCore utilization (%)", "seconds", cores, ranges.neuroncores),
      chart("host", "Host CPU utilization (%)", "seconds", hosts, ranges.host),
      chart("eval", "Evaluation", "step", evals),
    ]);
  }

  function streamNotes(stream) {
    if (!stream || !stream.notes.length) return [];
    return [el("ul", { class: "notes", "data-testid": "stream-notes" }, stream.notes.map((n) => el("li", {}, n)))];
  }

  /* The run's profile traces (profile_steps), each a download of api/runs/<dag>/<run>/profile/<name>. */
  function profileLinks(detail) {
    const names = (detail.stream && detail.stream.profiles) || [];
    if (!names.length) return [];
    const run = detail.run;
    const base = "api/runs/" + encodeURIComponent(run.dag_id) + "/" + encodeURIComponent(run.run_id) + "/profile/";
    const query = "?task_id=" + encodeURIComponent(run.task_id) + "&map_index=" + encodeURIComponent(run.map_index);
    const links = names.flatMap((name, i) => [i ? ", " : "", el("a", { href: base + encodeURIComponent(name) + query, download: name }, name)]);
    return [el("p", { class: "profiles", "data-testid": "profiles" }, ["Profile traces (Perfetto, chrome://tracing): ", ...links])];
  }

  /* How to get curves, as the server words it (detail.help), with its example and where the docs say more. */
  function helpSection(help) {
    const docs = help.docs_url ? el("a", { href: help.docs_url, target: "_blank", rel: "noopener" }, help.docs) : help.docs;
    return el("section", { class: "help", "data-testid": "help" }, [
      el("p", {}, help.text),
      el("pre", {}, help.example),
      el("p", {}, ["More: ", docs, "."]),
    ]);
  }

  function noJobView(detail) {
    return [
      el("h2", {}, detail.dag_id + " \u00b7 " + detail.run_id),
      el("p", { class: "empty", "data-testid": "no-job" }, "No Trainium job in this DAG run: nothing to plot."),
      helpSection(detail.help),
    ];
  }

  function runView(detail) {
    if (!detail.run) return noJobView(detail);
    const run = detail.run;
    const parts = [el("h2", {}, run.dag_id + " \u00b7 " + run.task_id), summary(run, detail.series, detail.stream)];
    parts.push(...streamNotes(detail.stream));
    parts.push(...profileLinks(detail));
    if (detail.series) {
      if (detail.stream.progress) parts.push(el("p", { "data-testid": "progress" }, detail.stream.progress));
      parts.push(runCharts(detail));
    } else if (detail.help) {
      parts.push(helpSection(detail.help));
    }
    if (!run.training) return parts; // a job that is not a training registers no model to compare
    parts.push(el("h3", {}, "Previous versions of " + (run.model ? run.model.name : "this model")));
    if (detail.previous.length) {
      parts.push(runsTable(detail.previous.map((p) => p.run), true));
    } else {
      parts.push(el("p", { class: "empty", "data-testid": "no-previous" }, "none"));
    }
    return parts;
  }

  function runPath() {
    const q = new URLSearchParams();
    if (params.get("task_id")) q.set("task_id", params.get("task_id"));
    const mapIndex = params.get("map_index");
    if (mapIndex && /^-?\d+$/.test(mapIndex)) q.set("map_index", mapIndex);
    const path = "api/runs/" + encodeURIComponent(params.get("dag_id")) + "/" + encodeURIComponent(params.get("run_id"));
    return path + (q.toString() ? "?" + q : "");
  }

  /* Draw the run; while its task runs, ask again and redraw (a failed ask is shown and retried). */
  async function showRun() {
    const detail = await getJson(runPath());
    main.replaceChildren(...runView(detail));
    if (!detail.run) {
      status.textContent = "run " + detail.run_id + ": no Trainium job";
      return;
    }
    status.textContent = "run " + detail.run.run_id;
    document.body.setAttribute("data-state", detail.run.state || "none");
    if (!ENDED.has(detail.run.state)) setTimeout(refresh, REFRESH_MS);
  }

  let refreshes = 0;
  async function refresh() {
    try {
      const detail = await getJson(runPath());
      main.replaceChildren(...runView(detail));
      if (!detail.run) return;
      document.body.setAttribute("data-state", detail.run.state || "none");
      document.body.setAttribute("data-refreshes", String(++refreshes));
      status.textContent = "run " + detail.run.run_id + (ENDED.has(detail.run.state) ? "" : " (live)");
      if (ENDED.has(detail.run.state)) return;
    } catch (err) {
      status.textContent = "refresh failed, retrying: " + err.message;
    }
    setTimeout(refresh, REFRESH_MS);
  }

  async function showList() {
    const data = await getJson("api/runs");
    if (!data.runs.length) {
      main.append(el("p", { class: "empty", "data-testid": "no-runs" }, "No Trainium jobs yet in the DAGs you may read."));
    } else {
      main.append(runsTable(data.runs, true));
    }
    status.textContent = data.total + " Trainium job" + (data.total === 1 ? "" : "s");
  }

  (params.get("dag_id") && params.get("run_id") ? showRun() : showList())
    .then(() => document.body.setAttribute("data-loaded", "true"))
    .catch((err) => {
      if (err.message.startsWith("404")) {
        main.append(el("p", { class: "empty", "data-testid": "not-found" }, "No such DAG run, or its DAG is not one you may read."));
      }
      status.textContent = "error: " + err.message;
      document.body.setAttribute("data-loaded", "error");
    });
})();
