import Mustache

/// The console's pages as Mustache templates, compiled into the binary: `stratus serve` needs no
/// files beside it. Every value is HTML-escaped unless a template says `{{{…}}}` (only the page body,
/// itself rendered from a template, and the charts' SVG, drawn from numbers).
enum ConsoleTemplates {
    /// The templates by name, parsed once.
    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        for (name, text) in templates {
            do {
                try library.register(text, named: name)
            } catch {
                preconditionFailure("console template '\(name)' does not parse: \(error)")
            }
        }
        return library
    }()

    /// `name` rendered with `values`.
    static func render(_ name: String, _ values: [String: Any]) -> String {
        guard let text = library.render(values, withTemplate: name) else {
            preconditionFailure("no console template '\(name)'")
        }
        return text
    }

    static let templates: [String: String] = [
        "layout": """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <meta name="csrf" content="{{csrf}}"><title>{{title}} · Stratus console</title><link rel="icon" href="data:,">
            <link rel="stylesheet" href="/console/console.css"><script src="/console/console.js" defer></script></head>
            <body><header><a class="brand" href="/console/containers">Stratus</a>
            <nav><a href="/console/containers">Containers</a><a href="/console/requests">Requests</a>
            <a href="/console/activity">Activity</a><a href="/console/health">Health</a><a href="/console/audit">Audit log</a></nav>
            <form method="post" action="/console/signout"><input type="hidden" name="csrf" value="{{csrf}}">
            <button id="signout">Sign out</button></form></header>
            {{#container}}<nav class="sub"><strong>{{identifier}}</strong>
            <a href="/console/containers/{{path}}">Users and keys</a><a href="/console/containers/{{path}}/data">Data</a>
            <a href="/console/containers/{{path}}/schema">Schema</a><a href="/console/containers/{{path}}/people">Devices and subscriptions</a></nav>{{/container}}
            <main id="page" data-page="{{page}}" data-container="{{#container}}{{identifier}}{{/container}}">
            <h1>{{title}}</h1>
            {{{body}}}
            </main></body></html>
            """,
        "signin": """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><title>Sign in · Stratus console</title><link rel="icon" href="data:,">
            <link rel="stylesheet" href="/console/console.css"></head>
            <body class="signin"><main><h1>Stratus console</h1>
            <p>Sign in with the server's admin token (<code>credentials.json</code> in the data directory, printed on first start).</p>
            {{#error}}<p class="error">{{error}}</p>{{/error}}
            <form method="post" action="/console/signin"><label>Admin token
            <input type="password" name="token" id="token" autocomplete="off" required autofocus></label>
            <button id="signin">Sign in</button></form></main></body></html>
            """,
        "containers": """
            <table><tr><th>Container</th><th>Sign-up</th><th>Created</th></tr>
            {{#containers}}<tr><td><a href="/console/containers/{{path}}">{{identifier}}</a></td><td>{{signUp}}</td><td>{{created}}</td></tr>{{/containers}}
            </table>
            <h2>New container</h2>
            <form id="new-container" data-api="/admin/1/containers" data-method="POST" data-reveal="apiToken">
            <label>Identifier <input name="identifier" required placeholder="iCloud.com.example.app"></label>
            <label><input type="checkbox" name="allowsSignUp" checked> anyone holding an API token may sign up</label>
            <button>Create</button><output></output></form>
            """,
        "container": """
            <h2>Users</h2>
            <table id="users"><tr><th>Username</th><th>Record name</th><th>E-mail</th><th>Signs in with</th><th>Created</th><th>Holds</th><th>State</th><th></th></tr>
            {{#users}}<tr data-user="{{username}}"><td>{{username}}</td><td><code>{{recordName}}</code></td><td>{{email}}</td>
            <td>{{#identities}}<div class="identity">{{provider}} <code>{{subject}}</code> {{email}}
            <form class="inline" data-api="{{unlink}}" data-method="DELETE" data-confirm="Unlink this {{provider}} identity? It no longer signs this user in."><button>Unlink</button><output></output></form></div>{{/identities}}</td>
            <td>{{created}}</td><td>{{holds}}</td>
            <td>{{#disabled}}<span class="bad">disabled {{disabled}}</span>{{/disabled}}{{^disabled}}active{{/disabled}}</td>
            <td><form class="inline" data-api="{{api}}/users/{{recordName}}" data-method="PATCH">
            <input type="hidden" name="disabled" value="{{^disabled}}true{{/disabled}}{{#disabled}}false{{/disabled}}" data-type="bool">
            <button>{{^disabled}}Disable{{/disabled}}{{#disabled}}Enable{{/disabled}}</button><output></output></form>
            <form class="inline" data-api="{{api}}/users/{{recordName}}" data-method="PATCH">
            <input type="password" name="password" placeholder="new password" required><button>Reset password</button><output></output></form>
            <form class="inline" data-api="{{api}}/users/{{recordName}}" data-method="DELETE" data-confirm="Delete this account and its private data? What it shared is shared no more; its public records stay."><button>Delete</button><output></output></form>
            <a href="/console/containers/{{path}}/people?user={{recordName}}">devices</a></td></tr>{{/users}}
            </table>
            <form id="new-user" data-api="{{api}}/users" data-method="POST"><label>Username <input name="username" required></label>
            <label>Password <input type="password" name="password" required></label><button>Create user</button><output></output></form>
            <h2>Sign-in</h2>
            <p>Users sign in {{#passwords}}with a password or {{/passwords}}with these identity providers (set them with
            <code>stratus admin set-apple</code> and <code>set-oidc</code>, or the admin API; secrets are never shown).
            Register <code>&lt;this server&gt;{{returnPath}}/&lt;provider&gt;</code> as each provider's redirect URI for the browser sign-in.</p>
            <table id="providers"><tr><th>Provider</th><th>Issuer</th><th>Client IDs</th><th>Set</th><th></th></tr>
            {{#providers}}<tr><td>{{name}}</td><td>{{issuer}}{{#keysURL}}<br><span class="bad">keys from {{keysURL}}, not Apple's</span>{{/keysURL}}</td><td>{{clientIDs}}</td><td>{{updated}}</td>
            <td><form class="inline" data-api="{{remove}}" data-method="DELETE" data-confirm="Stop signing users in with {{name}}?"><button>Remove</button><output></output></form></td></tr>{{/providers}}</table>
            <form id="passwords" class="inline" data-api="{{api}}/signin/passwords" data-method="PUT">
            <input type="hidden" name="enabled" value="{{^passwords}}true{{/passwords}}{{#passwords}}false{{/passwords}}" data-type="bool">
            <button>{{#passwords}}Turn passwords off{{/passwords}}{{^passwords}}Turn passwords on{{/passwords}}</button><output></output></form>
            <h2>API tokens</h2>
            <table id="tokens"><tr><th>Name</th><th>Created</th><th></th></tr>{{#tokens}}<tr data-token="{{name}}"><td>{{name}}</td><td>{{created}}</td>
            <td><form class="inline" data-api="{{api}}/tokens/{{id}}" data-method="DELETE" data-confirm="Revoke the API token {{name}}? Apps that use it are refused from now on."><button>Revoke</button><output></output></form></td></tr>{{/tokens}}</table>
            <form id="new-token" data-api="{{api}}/tokens" data-method="POST" data-reveal="apiToken">
            <label>Name <input name="name" placeholder="web"></label><button>Create API token</button><output></output></form>
            <h2>Server-to-server keys</h2>
            <table><tr><th>Key ID</th><th>Environment</th><th>Created</th><th>Revoked</th><th></th></tr>
            {{#keys}}<tr><td><code>{{keyID}}</code></td><td>{{environment}}</td><td>{{created}}</td><td>{{revoked}}</td>
            <td>{{^revoked}}<form class="inline" data-api="{{api}}/keys/{{keyID}}" data-method="DELETE"><button>Revoke</button><output></output></form>{{/revoked}}</td></tr>{{/keys}}</table>
            <form data-api="{{api}}/keys" data-method="POST"><label>Environment <select name="environment">
            <option>development</option><option>production</option></select></label>
            <label>Public key (PEM) <textarea name="publicKey" rows="4" required></textarea></label><button>Register key</button><output></output></form>
            <h2>Device push</h2>
            <p>The credentials APNs, FCM and Web Push are sent with (set them with <code>stratus admin set-apns</code>,
            <code>set-fcm</code> and <code>create-web-push-key</code>, or the admin API); their private keys are never shown.
            {{#webPushKey}}Web apps subscribe with <code>{{webPushKey}}</code>.{{/webPushKey}}</p>
            <table id="push-channels"><tr><th>Channel</th><th>Set</th><th>State on this instance</th><th>Last push through</th><th>Last failure</th><th></th></tr>
            {{#pushChannels}}<tr><td>{{channel}}</td><td>{{configured}}</td><td>{{state}}</td><td>{{lastSuccess}}</td><td>{{lastFailure}}</td>
            <td>{{#configured}}<form class="inline" data-api="{{api}}/push/{{channel}}" data-method="DELETE"><button>Stop</button><output></output></form>{{/configured}}</td></tr>{{/pushChannels}}</table>
            <h2>Quotas</h2>
            <p>What each user (their private database, and what they created in the public one), and the container in
            all, may hold: {{quotaSource}}. An empty field is no limit. The container holds {{holds}}.</p>
            <form id="quotas" data-api="{{api}}/quotas" data-method="PUT">
            <table><tr><th></th><th>Records</th><th>Bytes of records</th><th>Bytes of assets held</th><th>Bytes uploaded, not yet saved</th></tr>
            {{#userQuota}}<tr><td>Each user</td><td><input name="user.records" data-type="limit" value="{{records}}"></td>
            <td><input name="user.recordBytes" data-type="limit" value="{{recordBytes}}"></td>
            <td><input name="user.assetBytes" data-type="limit" value="{{assetBytes}}"></td>
            <td><input name="user.pendingUploadBytes" data-type="limit" value="{{pendingUploadBytes}}"></td></tr>{{/userQuota}}
            {{#containerQuota}}<tr><td>The container</td><td><input name="container.records" data-type="limit" value="{{records}}"></td>
            <td><input name="container.recordBytes" data-type="limit" value="{{recordBytes}}"></td>
            <td><input name="container.assetBytes" data-type="limit" value="{{assetBytes}}"></td><td></td></tr>{{/containerQuota}}
            </table><button>Save quotas</button><output></output></form>
            {{#ownQuotas}}<form class="inline" data-api="{{api}}/quotas" data-method="DELETE"><button>Use the server's defaults</button><output></output></form>{{/ownQuotas}}
            <h2>Databases</h2>
            <p>Each environment has a public database, and each user a private and a shared one; those written so far:</p>
            <table id="databases"><tr><th>Environment</th><th>Database</th><th>Owner</th><th>Zones</th></tr>
            {{#databases}}<tr><td>{{environment}}</td><td>{{scope}}</td><td>{{owner}}</td><td>{{zones}}</td></tr>{{/databases}}</table>
            {{#moreDatabases}}<p>The first {{shown}} of {{count}}.</p>{{/moreDatabases}}
            """,
        "data": """
            <form id="scope" class="bar"><label>Environment <select name="environment"><option>development</option><option>production</option></select></label>
            <label>Database <select name="database"><option>private</option><option>public</option><option>shared</option></select></label>
            <label>Act as <select name="user"><option value="">nobody (public reads)</option>
            {{#users}}<option value="{{recordName}}">{{username}}</option>{{/users}}</select></label>
            <button id="load-zones" type="button">Load zones</button>
            <label>Zone <select name="zone" id="zone"><option value="_defaultZone">_defaultZone</option></select></label>
            <button type="button" id="delete-zone" class="danger">Delete zone</button>
            <label>New zone <input id="new-zone" placeholder="name"></label><button type="button" id="create-zone">Create zone</button></form>
            <h2>Query</h2>
            <form id="query" class="bar"><label>Record type <input name="recordType" required></label>
            <span id="filters"></span><button type="button" id="add-filter">+ filter</button>
            <span id="sorts"><span class="sort"><label>Sort by <input class="field" name="sortField" placeholder="field"></label>
            <label><input type="checkbox" class="ascending" name="ascending" checked> ascending</label></span></span>
            <button type="button" id="add-sort">+ sort</button>
            <button id="run-query">Run query</button> <button type="button" id="browse-zone">Every record of the zone</button></form>
            <p class="error" id="query-error"></p>
            <table id="results"></table>
            <section id="record" hidden><h2 id="record-title"></h2><table id="record-fields"></table><div id="previews"></div>
            <form id="edit-record"><label>Fields (JSON, as records/modify takes them)<textarea name="fields" rows="8"></textarea></label>
            <button id="save-record">Save</button> <button type="button" id="delete-record" class="danger">Delete</button><output></output></form></section>
            <h2>New record</h2>
            <form id="create-record"><label>Record type <input name="recordType" required></label><label>Record name <input name="recordName" placeholder="(random)"></label>
            <label>Fields (JSON) <textarea name="fields" rows="4">{"title": {"value": "Hello"}}</textarea></label><button id="create">Create</button><output></output></form>
            """,
        "schema": """
            <div class="actions"><form data-api="{{api}}/deploy-schema" data-method="POST" data-confirm="Deploy the development schema to production?">
            <button id="deploy">Deploy to production</button><output></output></form>
            <form data-api="{{api}}/reset-development" data-method="POST" data-confirm="Delete all development data and reset its schema to production's?">
            <button class="danger">Reset development</button><output></output></form></div>
            <h2>What a deploy to production does</h2>
            {{#hasDiff}}<table id="diff" class="diff"><tr><th>Record type</th><th>Field</th><th>Deploying</th><th></th></tr>
            {{#diff}}<tr class="{{kind}}"><td>{{recordType}}</td><td>{{field}}</td><td>{{kind}}</td><td>{{detail}}</td></tr>{{/diff}}</table>
            {{#blocked}}<p class="blocked">The deploy is refused while development lacks what production has (the rows marked blocks):
            production's data would be lost.</p>{{/blocked}}{{/hasDiff}}{{^hasDiff}}<p id="diff">Production has the development schema.</p>{{/hasDiff}}
            {{#environments}}<h2>{{name}}</h2>
            <table><tr><th>Record type</th><th>Field</th><th>Type</th><th>Indexes</th></tr>
            {{#fields}}<tr><td>{{recordType}}</td><td>{{name}}</td><td>{{type}}</td><td>{{indexes}}</td></tr>{{/fields}}</table>
            <details><summary>In CloudKit's schema language</summary><pre>{{text}}</pre></details>{{/environments}}
            """,
        "people": """
            <form class="bar" method="get"><label>User <select name="user">{{#users}}<option value="{{recordName}}" {{#selected}}selected{{/selected}}>{{username}}</option>{{/users}}</select></label>
            <button>Show</button></form>
            {{#user}}
            <h2>Push devices</h2>
            <table id="devices"><tr><th>Device</th><th>Environment</th><th>Connected</th><th>Waiting</th><th>Missed notifications</th><th>Last seen</th></tr>
            {{#devices}}<tr><td>{{#requestsPath}}<a href="/console/requests?device={{requestsPath}}">{{deviceID}}</a>{{/requestsPath}}{{^requestsPath}}{{deviceID}}{{/requestsPath}}</td>
            <td>{{environment}}</td><td>{{connected}}</td><td>{{waitingCount}}</td><td>{{missed}}</td><td>{{lastSeen}}</td></tr>
            {{#hasWaiting}}<tr><td colspan="6"><table class="waiting"><tr><th>Waiting notification of subscription</th><th>Database</th><th>Zone</th><th>Record</th><th>Waiting for</th></tr>
            {{#waiting}}<tr><td>{{subscription}}</td><td>{{database}}</td><td>{{zone}}</td><td>{{record}}</td><td>{{age}}</td></tr>{{/waiting}}</table></td></tr>{{/hasWaiting}}{{/devices}}</table>
            {{^devices}}<p>No push device of this user is known to this instance.</p>{{/devices}}
            <h2>Devices woken through APNs, FCM and Web Push</h2>
            <table id="platform-devices"><tr><th>Device</th><th>Environment</th><th>Channel</th><th>Registered</th><th>Last result (this instance)</th><th>At</th></tr>
            {{#platformDevices}}<tr><td>{{deviceID}}</td><td>{{environment}}</td><td>{{channel}}</td><td>{{registered}}</td><td>{{lastResult}}</td><td>{{lastResultAt}}</td></tr>{{/platformDevices}}</table>
            {{^platformDevices}}<p>This user registered no device token.</p>{{/platformDevices}}
            <h2>Subscriptions</h2>
            <table id="subscriptions"><tr><th>Environment</th><th>Database</th><th>Subscription</th><th>Kind</th><th>Watches</th><th>Fires on</th><th>Notifications</th></tr>
            {{#subscriptions}}<tr><td>{{environment}}</td><td>{{database}}</td><td>{{subscriptionID}}</td><td>{{type}}</td><td>{{watches}}</td><td>{{firesOn}}</td><td>{{notification}}</td></tr>{{/subscriptions}}</table>
            <h2>Shares</h2>
            <table id="shares"><tr><th>Environment</th><th>Zone</th><th>Owner</th><th>Participants</th></tr>
            {{#shares}}<tr><td>{{environment}}</td><td>{{zone}}</td><td>{{owner}}</td><td>{{participants}}</td></tr>{{/shares}}</table>
            <h2>Recent requests</h2>
            <p>Of this user, and of its devices before they were known as its (a request refused for an expired session carries only its device ID).</p>
            {{{requests}}}
            {{/user}}
            """,
        "requestTable": """
            <table class="requests"><tr><th>Time</th><th>Method</th><th>Path</th><th>Status</th><th>Error</th><th>ms</th><th>User</th><th>Device</th></tr>
            {{#entries}}<tr class="{{#failed}}failed{{/failed}}"><td><a href="/console/requests/{{id}}">{{time}}</a></td><td>{{method}}</td><td>{{path}}</td>
            <td>{{status}}</td><td>{{errorCode}}</td><td>{{milliseconds}}</td><td>{{user}}</td><td>{{deviceID}}</td></tr>{{/entries}}</table>
            {{^entries}}<p>No request matches.</p>{{/entries}}
            """,
        "requests": """
            <form class="bar" method="get" id="request-filter"><label>User (name or record name) <input name="user" value="{{filter.user}}"></label>
            <label>Device <input name="device" value="{{filter.device}}"></label>
            <label>Endpoint contains <input name="endpoint" value="{{filter.endpoint}}"></label>
            <label>Status <input name="status" list="statuses" size="6" value="{{filter.status}}" placeholder="any"></label>
            <datalist id="statuses"><option value="error">4xx and 5xx</option><option value="5xx">5xx</option><option value="401"><option value="409"><option value="429"></datalist>
            <label>Request ID <input name="id" value="{{filter.id}}"></label>
            <label><input type="checkbox" name="live" value="1" {{#filter.live}}checked{{/filter.live}}> live</label><button>Filter</button></form>
            <div id="request-log" data-live="{{#filter.live}}1{{/filter.live}}">{{{table}}}</div>
            """,
        "request": """
            <table class="facts">{{#facts}}<tr><th>{{name}}</th><td>{{value}}</td></tr>{{/facts}}</table>
            <p><a href="/console/requests?user={{user}}">Other requests of this user</a></p>
            """,
        "activity": """
            <p>This instance, the last hour, in ten-second steps (the same figures as <code>/metrics</code>).</p>
            {{#charts}}<figure><figcaption>{{title}} <span class="latest">now {{latest}}, peak {{peak}}</span></figcaption>{{{svg}}}</figure>{{/charts}}
            """,
        "health": """
            <table class="facts">{{#facts}}<tr><th>{{name}}</th><td>{{value}}</td></tr>{{/facts}}</table>
            """,
        "audit": """
            <table id="audit"><tr><th>Time</th><th>Who</th><th>What</th><th>Status</th></tr>
            {{#entries}}<tr><td>{{time}}</td><td>{{actor}}</td><td>{{action}}</td><td>{{status}}</td></tr>{{/entries}}</table>
            """,
    ]
}
