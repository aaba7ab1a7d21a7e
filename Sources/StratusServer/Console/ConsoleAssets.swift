/// The console's script and style sheet, compiled into the binary. The script is plain JavaScript
/// with no build step: forms marked `data-api` call the documented endpoints (the admin API, and
/// the database endpoints as the user the page acts as) with the session's CSRF token, and the data
/// page queries, shows, edits and deletes records through `records/query` and `records/modify`.
enum ConsoleAssets {
    static let script = #"""
        "use strict";
        const csrf = document.querySelector('meta[name="csrf"]')?.content ?? "";
        const page = document.getElementById("page");

        // Times come as ISO 8601 in UTC (what the server knows); each shows in the reader's own time
        // zone and format, the UTC one on hover.
        const utcTime = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
        function localizeTimes(root) {
          for (const cell of root.querySelectorAll("td, td > a, dd")) {
            const text = cell.textContent.trim();
            if (cell.children.length > 0 || !utcTime.test(text)) continue;
            cell.title = text;
            cell.textContent = new Date(text).toLocaleString();
          }
        }
        localizeTimes(document);

        // Calls an endpoint as the console: the session cookie goes along (same origin), the CSRF
        // token in its header, and on the database endpoints the user the page acts as.
        async function api(path, method, body, user) {
          const headers = { "X-Stratus-Console-CSRF": csrf };
          if (body !== undefined) headers["Content-Type"] = "application/json";
          if (user) headers["X-Stratus-Console-User"] = user;
          const response = await fetch(path, {
            method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
          });
          const text = await response.text();
          let json = {};
          try { json = text ? JSON.parse(text) : {}; } catch { json = { reason: text }; }
          if (!response.ok) throw new Error(`${response.status} ${json.serverErrorCode ?? ""}: ${json.reason ?? text}`);
          return json;
        }

        function formBody(form) {
          const body = {};
          for (const input of form.querySelectorAll("input[name], select[name], textarea[name]")) {
            // A dotted name is a member of a member: `user.records` sets body.user.records.
            const path = input.name.split(".");
            let target = body;
            for (const key of path.slice(0, -1)) target = target[key] ??= {};
            const name = path[path.length - 1];
            if (input.type === "checkbox") { target[name] = input.checked; continue; }
            // A limit is a whole number, or null for none.
            if (input.dataset.type === "limit") { target[name] = input.value.trim() === "" ? null : Number(input.value); continue; }
            if (input.value === "" && !input.required) continue;
            target[name] = input.dataset.type === "bool" ? input.value === "true" : input.value;
          }
          return body;
        }

        // Forms that call an admin endpoint: the answer's `data-reveal` member is shown once (a new
        // API token), otherwise the page reloads to show the change.
        for (const form of document.querySelectorAll("form[data-api]")) {
          form.addEventListener("submit", async (event) => {
            event.preventDefault();
            const output = form.querySelector("output");
            // The last attempt's message goes; this one's replaces it.
            output.className = "";
            output.textContent = "";
            if (form.dataset.confirm && !confirm(form.dataset.confirm)) return;
            try {
              const method = form.dataset.method;
              const answer = await api(form.dataset.api, method, method === "DELETE" ? undefined : formBody(form));
              if (form.dataset.reveal) {
                output.className = "secret";
                output.textContent = `${form.dataset.reveal}: ${answer[form.dataset.reveal]} (shown once; copy it now)`;
              } else {
                location.reload();
              }
            } catch (error) {
              output.className = "error";
              output.textContent = error.message;
            }
          });
        }

        // The live request log reloads itself every two seconds.
        const log = document.getElementById("request-log");
        if (log && log.dataset.live) {
          setInterval(async () => {
            const response = await fetch(location.pathname + location.search + (location.search ? "&" : "?") + "fragment=1",
              { credentials: "same-origin" });
            if (response.ok) log.innerHTML = await response.text();
          }, 2000);
        }

        if (page?.dataset.page === "data") dataPage(page.dataset.container);

        function dataPage(container) {
          const scope = document.getElementById("scope");
          const base = () => `/database/1/${encodeURIComponent(container)}/${scope.environment.value}/${scope.database.value}/`;
          const user = () => scope.user.value;
          const zoneID = () => {
            const [zoneName, ownerRecordName] = scope.zone.value.split("\u0000");
            return ownerRecordName ? { zoneName, ownerRecordName } : { zoneName };
          };
          const queryError = document.getElementById("query-error");
          const show = (element, error) => { element.className = "error"; element.textContent = error.message; };
          let current = null;

          // The zones of the database, `selected` chosen when it is among them.
          async function loadZones(selected) {
            try {
              const answer = await api(base() + "zones/list", "GET", undefined, user());
              scope.zone.replaceChildren(...answer.zones.map((zone) => {
                const option = document.createElement("option");
                option.value = zone.zoneID.zoneName + (zone.zoneID.ownerRecordName ? "\u0000" + zone.zoneID.ownerRecordName : "");
                option.textContent = zone.zoneID.zoneName + (zone.zoneID.ownerRecordName ? ` (${zone.zoneID.ownerRecordName})` : "");
                option.selected = zone.zoneID.zoneName === selected;
                return option;
              }));
              queryError.textContent = "";
            } catch (error) { show(queryError, error); }
          }
          document.getElementById("load-zones").addEventListener("click", () => loadZones());

          // Zones are created and deleted through zones/modify, as the user the page acts as.
          const zoneChange = async (operationType, zone) => {
            const answer = await api(base() + "zones/modify", "POST", { operations: [{ operationType, zone }] }, user());
            const failed = answer.zones?.find((item) => item.serverErrorCode);
            if (failed) throw new Error(`${failed.serverErrorCode}: ${failed.reason}`);
          };
          document.getElementById("create-zone").addEventListener("click", async () => {
            const name = document.getElementById("new-zone").value;
            try {
              await zoneChange("create", { zoneID: { zoneName: name } });
              await loadZones(name);
            } catch (error) { show(queryError, error); }
          });
          document.getElementById("delete-zone").addEventListener("click", async () => {
            if (!confirm(`Delete the zone ${scope.zone.value.split("\u0000")[0]} and every record in it?`)) return;
            try {
              await zoneChange("delete", { zoneID: zoneID() });
              await loadZones();
            } catch (error) { show(queryError, error); }
          });

          const comparators = ["EQUALS", "NOT_EQUALS", "LESS_THAN", "LESS_THAN_OR_EQUALS", "GREATER_THAN",
            "GREATER_THAN_OR_EQUALS", "BEGINS_WITH", "NOT_BEGINS_WITH", "IN", "NOT_IN", "LIST_CONTAINS",
            "NOT_LIST_CONTAINS", "CONTAINS_ALL_TOKENS", "CONTAINS_ANY_TOKENS"];
          document.getElementById("add-filter").addEventListener("click", () => {
            const row = document.createElement("span");
            row.className = "filter";
            row.innerHTML = `<input class="field" placeholder="field"><select class="comparator">${
              comparators.map((c) => `<option>${c}</option>`).join("")}</select><input class="value" placeholder="value or JSON">`;
            document.getElementById("filters").append(row);
          });

          document.getElementById("add-sort").addEventListener("click", () => {
            const row = document.createElement("span");
            row.className = "sort";
            row.innerHTML = `<label>then by <input class="field" placeholder="field"></label>
              <label><input type="checkbox" class="ascending" checked> ascending</label>`;
            document.getElementById("sorts").append(row);
          });

          // The zone's live records, whatever their type: its change feed from the start, up to 1,000.
          document.getElementById("browse-zone").addEventListener("click", async () => {
            try {
              let records = [], syncToken, more = true;
              while (more && records.length < 1000) {
                const answer = await api(base() + "records/changes", "POST",
                  { zoneID: zoneID(), resultsLimit: 200, ...(syncToken ? { syncToken } : {}) }, user());
                records = records.concat(answer.records.filter((record) => !record.deleted));
                syncToken = answer.syncToken;
                more = answer.moreComing;
              }
              renderResults(records);
              queryError.textContent = "";
            } catch (error) { show(queryError, error); }
          });

          // A value typed as JSON (a number, a list) is sent as such, anything else as a string.
          const parsed = (text) => { try { return JSON.parse(text); } catch { return text; } };

          document.getElementById("query").addEventListener("submit", async (event) => {
            event.preventDefault();
            const form = event.target;
            const query = { recordType: form.recordType.value, filterBy: [], sortBy: [] };
            for (const row of document.querySelectorAll("#filters .filter")) {
              query.filterBy.push({ fieldName: row.querySelector(".field").value,
                comparator: row.querySelector(".comparator").value,
                fieldValue: { value: parsed(row.querySelector(".value").value) } });
            }
            for (const row of document.querySelectorAll("#sorts .sort")) {
              const fieldName = row.querySelector(".field").value;
              if (fieldName) query.sortBy.push({ fieldName, ascending: row.querySelector(".ascending").checked });
            }
            try {
              const answer = await api(base() + "records/query", "POST", { zoneID: zoneID(), query, resultsLimit: 200 }, user());
              renderResults(answer.records);
              queryError.textContent = "";
            } catch (error) { show(queryError, error); }
          });

          function renderResults(records) {
            const table = document.getElementById("results");
            table.innerHTML = "<tr><th>Record name</th><th>Type</th><th>Modified</th><th>Fields</th></tr>";
            for (const record of records) {
              const row = table.insertRow();
              const link = document.createElement("a");
              link.href = "#";
              link.textContent = record.recordName;
              link.addEventListener("click", (event) => { event.preventDefault(); showRecord(record); });
              row.insertCell().append(link);
              row.insertCell().textContent = record.recordType ?? "";
              row.insertCell().textContent = record.modified ? new Date(record.modified.timestamp).toISOString() : "";
              row.insertCell().textContent = JSON.stringify(Object.fromEntries(
                Object.entries(record.fields ?? {}).map(([name, field]) => [name, field.value]))).slice(0, 160);
            }
          }

          function showRecord(record) {
            current = record;
            document.getElementById("record").hidden = false;
            document.getElementById("record-title").textContent = `${record.recordType} ${record.recordName}`;
            const table = document.getElementById("record-fields");
            table.innerHTML = "<tr><th>Field</th><th>Type</th><th>Value</th></tr>";
            const previews = document.getElementById("previews");
            previews.replaceChildren();
            for (const [name, field] of Object.entries(record.fields ?? {})) {
              const row = table.insertRow();
              row.insertCell().textContent = name;
              row.insertCell().textContent = field.type ?? "";
              row.insertCell().textContent = JSON.stringify(field.value);
              for (const asset of [field.value].flat()) {
                if (asset && typeof asset === "object" && asset.downloadURL) preview(name, asset, previews);
              }
            }
            const editable = Object.fromEntries(Object.entries(record.fields ?? {})
              .filter(([, field]) => !String(field.type ?? "").startsWith("ASSET"))
              .map(([name, field]) => [name, { value: field.value, type: field.type }]));
            document.getElementById("edit-record").fields.value = JSON.stringify(editable, null, 2);
          }

          // Images are shown; text is shown in its first 4 KB.
          async function preview(name, asset, into) {
            const response = await fetch(asset.downloadURL, { credentials: "same-origin", headers: { Range: "bytes=0-4095" } });
            if (!response.ok) return;
            const blob = await response.blob();
            const bytes = new Uint8Array(await blob.arrayBuffer());
            const figure = document.createElement("figure");
            const caption = document.createElement("figcaption");
            caption.textContent = `${name} (${asset.size} bytes)`;
            const isPNG = bytes[0] === 0x89 && bytes[1] === 0x50, isJPEG = bytes[0] === 0xff && bytes[1] === 0xd8;
            const isGIF = bytes[0] === 0x47 && bytes[1] === 0x49;
            if (isPNG || isJPEG || isGIF) {
              const whole = await (await fetch(asset.downloadURL, { credentials: "same-origin" })).blob();
              const image = document.createElement("img");
              image.src = URL.createObjectURL(whole);
              image.alt = name;
              figure.append(image);
            } else {
              const text = document.createElement("pre");
              text.textContent = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
              figure.append(text);
            }
            figure.prepend(caption);
            into.append(figure);
          }

          async function modify(operation, output) {
            try {
              const answer = await api(base() + "records/modify", "POST", { zoneID: zoneID(), operations: [operation] }, user());
              const result = answer.records[0];
              if (result.serverErrorCode) throw new Error(`${result.serverErrorCode}: ${result.reason}`);
              output.className = "ok";
              output.textContent = operation.operationType === "delete" ? "deleted" : `saved (change tag ${result.recordChangeTag})`;
              return result;
            } catch (error) { show(output, error); }
          }

          document.getElementById("edit-record").addEventListener("submit", async (event) => {
            event.preventDefault();
            const output = event.target.querySelector("output");
            let fields;
            try { fields = JSON.parse(event.target.fields.value); } catch (error) { return show(output, error); }
            const saved = await modify({ operationType: "update", record: { recordName: current.recordName,
              recordType: current.recordType, recordChangeTag: current.recordChangeTag, fields } }, output);
            if (saved) showRecord(saved);
          });
          document.getElementById("delete-record").addEventListener("click", async (event) => {
            if (!confirm(`Delete ${current.recordName}?`)) return;
            await modify({ operationType: "delete", record: { recordName: current.recordName,
              recordChangeTag: current.recordChangeTag } }, event.target.form.querySelector("output"));
          });
          document.getElementById("create-record").addEventListener("submit", async (event) => {
            event.preventDefault();
            const form = event.target, output = form.querySelector("output");
            let fields;
            try { fields = JSON.parse(form.fields.value); } catch (error) { return show(output, error); }
            const record = { recordType: form.recordType.value, fields };
            if (form.recordName.value) record.recordName = form.recordName.value;
            const saved = await modify({ operationType: "create", record }, output);
            if (saved) showRecord(saved);
          });
        }
        """#

    static let styleSheet = """
        body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
        header { display: flex; gap: 1.5em; align-items: center; background: #1d2330; color: #fff; padding: .6em 1.2em; }
        header a { color: #cfd8ea; text-decoration: none; margin-right: 1em; }
        header .brand { color: #fff; font-weight: 700; }
        header form { margin-left: auto; }
        nav.sub { background: #e4e8f0; padding: .5em 1.2em; display: flex; gap: 1.2em; }
        main { padding: 1em 1.5em; max-width: 1600px; }
        body.signin main { max-width: 420px; margin: 8vh auto; background: #fff; padding: 2em; border-radius: 8px; }
        table { border-collapse: collapse; background: #fff; margin: .5em 0 1em; width: 100%; }
        th, td { text-align: left; padding: .3em .6em; border-bottom: 1px solid #e4e8f0; vertical-align: top; }
        td { overflow-wrap: anywhere; } td[title], td > a[title] { white-space: nowrap; }
        tr.failed td { background: #fdecec; }
        .error, .bad { color: #b3261e; }
        .ok { color: #1e7b34; }
        .secret { display: block; background: #fff7d6; padding: .4em; font-family: monospace; }
        form { margin: .5em 0; }
        form.inline { display: inline-block; margin: 0 .3em 0 0; }
        form.bar, .actions { display: flex; flex-wrap: wrap; gap: .8em; align-items: end; }
        label { display: inline-flex; flex-direction: column; gap: .2em; margin-right: .6em; }
        textarea { width: 100%; min-width: 40em; font-family: monospace; }
        button { padding: .3em .8em; }
        button.danger { color: #b3261e; }
        pre { background: #fff; padding: .6em; overflow: auto; }
        table.diff tr.adds td { color: #1e7b34; } table.diff tr.removes td, table.diff tr.blocks td, p.blocked { color: #b3261e; }
        table.diff tr.changes td { color: #8a5a00; }
        figure { margin: .5em 0 1.2em; } figure svg { background: #fff; width: 100%; max-width: 960px; height: auto; }
        figure img { max-width: 320px; max-height: 240px; }
        .latest { color: #5b6478; margin-left: 1em; }
        .facts th { width: 16em; }
        """
}
