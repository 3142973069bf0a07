// A Node notes app on the built-in `http` module alone (no framework, no npm package), keeping its notes in a
// JSON file (NOTES_FILE: {"notes": [{"id": 1, "title": "..."}]}, rewritten whole with writeFileSync, ids
// increasing): nothing a server hook could watch, its truth is the file.  GET / is a small single-page app
// whose "Add" button fetches POST /api/notes and says "Saved!" on {ok: true}.  One app serves every case:
//   a plain title          saved (the file rewritten), 201 {ok: true, id};
//   first word "ghost"     201 {ok: true} and nothing written (a silent failure the page calls a save);
//   shorter than 2         422 {ok: false, error};
// and a rename (POST /api/notes/:id/rename) whose new title starts with "wrongrow" renames note id - 1 (else
// the smallest other id): the wrong row, under the same {ok: true}.
// Run with PORT, NOTES_FILE and RETICLE_SCRIPT (the script tag printed in the head, "" = none).
'use strict';
const fs = require('fs');
const http = require('http');

const PORT = Number(process.env.PORT || 3000);
const FILE = process.env.NOTES_FILE || 'notes.json';
const SCRIPT = process.env.RETICLE_SCRIPT || '';
const TOO_SHORT = 'Title must be at least 2 characters.';

function load() {
  return JSON.parse(fs.readFileSync(FILE, 'utf8'));
}

function store(data) {
  fs.writeFileSync(FILE, JSON.stringify(data, null, 2) + '\n');
}

if (!fs.existsSync(FILE)) {
  store({notes: []});
}

function firstWord(title) {
  return title.split(' ')[0];
}

function send(res, status, data) {
  const body = JSON.stringify(data);
  res.writeHead(status, {'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body)});
  res.end(body);
}

function readJson(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (err) {
        resolve(null);
      }
    });
  });
}

// the title of a JSON body, trimmed, or null when the body is not {"title": "..."}
function titleOf(body) {
  return body && typeof body.title === 'string' ? body.title.trim() : null;
}

function addNote(title) {
  if (firstWord(title) === 'ghost') {
    return null;  // nothing written, and the caller says it was
  }
  const data = load();
  const id = data.notes.reduce((top, note) => Math.max(top, note.id), 0) + 1;
  data.notes.push({id, title});
  store(data);
  return id;
}

// the note a rename writes: its own, or for a "wrongrow" title the one before it (else the smallest other id)
function renameTarget(notes, id, title) {
  if (!title.startsWith('wrongrow')) {
    return notes.find((note) => note.id === id);
  }
  const before = notes.find((note) => note.id === id - 1);
  if (before) {
    return before;
  }
  const others = notes.filter((note) => note.id !== id).sort((a, b) => a.id - b.id);
  return others[0];
}

const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>Notes</title>${SCRIPT}</head><body>
<main><h1>Notes</h1>
<form id="add"><label for="title">Title</label> <input id="title" name="title"> <button>Add</button></form>
<p role="status" id="status"></p>
<ul id="notes"></ul></main>
<script>
var list = document.getElementById('notes');
function show(note) {
  var li = document.createElement('li');
  if (note.id) { li.dataset.id = note.id; }
  li.textContent = note.title;
  list.appendChild(li);
}
fetch('/api/notes').then(function (resp) { return resp.json(); })
  .then(function (data) { data.notes.forEach(show); });
document.getElementById('add').addEventListener('submit', function (event) {
  event.preventDefault();
  var input = document.getElementById('title'), status = document.getElementById('status');
  var title = input.value;
  status.textContent = '';
  fetch('/api/notes', {method: 'POST', headers: {'Content-Type': 'application/json'},
                       body: JSON.stringify({title: title})})
    .then(function (resp) { return resp.json(); })
    .then(function (data) {
      if (!data.ok) { status.textContent = data.error || 'Could not save.'; return; }
      status.textContent = 'Saved!';
      show({id: data.id, title: title});
      input.value = '';
    })
    .catch(function () { status.textContent = 'Could not save.'; });
});
</script></body></html>`;

async function handle(req, res) {
  const path = new URL(req.url, 'http://localhost').pathname;
  let m;
  if (req.method === 'GET' && path === '/') {
    res.writeHead(200, {'Content-Type': 'text/html; charset=utf-8'});
    res.end(PAGE);
  } else if (req.method === 'GET' && path === '/api/notes') {
    send(res, 200, {notes: load().notes});
  } else if (req.method === 'POST' && path === '/api/notes') {
    const title = titleOf(await readJson(req));
    if (title === null) {
      send(res, 400, {ok: false, error: 'Send JSON {"title": "..."}.'});
    } else if (title.length < 2) {
      send(res, 422, {ok: false, error: TOO_SHORT});
    } else {
      const id = addNote(title);
      send(res, 201, id === null ? {ok: true} : {ok: true, id});
    }
  } else if (req.method === 'POST' && (m = /^\/api\/notes\/(\d+)\/rename$/.exec(path))) {
    const id = Number(m[1]);
    const title = titleOf(await readJson(req));
    const data = load();
    if (!data.notes.some((note) => note.id === id)) {
      send(res, 404, {ok: false, error: 'No such note.'});
    } else if (title === null) {
      send(res, 400, {ok: false, error: 'Send JSON {"title": "..."}.'});
    } else if (title.length < 2) {
      send(res, 422, {ok: false, error: TOO_SHORT});
    } else {
      const target = renameTarget(data.notes, id, title);
      if (target) {
        target.title = title;
        store(data);
      }
      send(res, 200, {ok: true});
    }
  } else {
    send(res, 404, {ok: false, error: 'Not found.'});
  }
}

http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    console.error('notes:', err);
    if (!res.headersSent) {
      send(res, 500, {ok: false, error: 'Something went wrong.'});
    } else {
      res.end();
    }
  });
}).listen(PORT, '127.0.0.1', () => console.log('notes on http://127.0.0.1:' + PORT));
