<?php
// A plain PHP 8 notes app on PDO, as PHP sites write one, with its truth in its database and nothing a server
// hook could watch: SQLite or PostgreSQL, chosen by NOTES_DSN ("sqlite:/abs/notes.db" or
// "pgsql:host=127.0.0.1;port=5432;dbname=notes;user=app"); the table is made if missing.  Every insert stores a
// secret-looking api_token beside the title.  One app serves every case, by the title's first word:
//   a plain title     saves the note (INSERT, committed);
//   "ghost ..."       writes nothing, and says "Note saved." all the same (a silent failure under a success flash);
//   "rollback ..."    inserts inside a transaction that is rolled back (never committed), and says "Note saved.";
//   shorter than 2    the form again under 200 with <p class="error"> above it.
// A rename whose new title starts with "wrongrow" renames the row before it (the wrong row) and says "Note renamed.".
// Forms post/redirect/get (303); POST /api/notes is the same save as a fetch JSON endpoint, used by GET /app.
// Run with `php -S 127.0.0.1:PORT index.php`; RETICLE_SCRIPT is the script tag printed in every head ("" = none).
$dsn = getenv('NOTES_DSN') ?: 'sqlite:' . sys_get_temp_dir() . '/notes.db';
$script = getenv('RETICLE_SCRIPT') ?: '';
$method = $_SERVER['REQUEST_METHOD'];
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);

function db($dsn) {
    $pdo = new PDO($dsn, null, null, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::ATTR_TIMEOUT => 5,
                                      PDO::ATTR_DEFAULT_FETCH_MODE => PDO::FETCH_ASSOC]);
    $key = $pdo->getAttribute(PDO::ATTR_DRIVER_NAME) === 'pgsql' ? 'SERIAL PRIMARY KEY'
                                                                  : 'INTEGER PRIMARY KEY AUTOINCREMENT';
    $pdo->exec("CREATE TABLE IF NOT EXISTS notes (id $key, title TEXT NOT NULL, api_token TEXT)");
    return $pdo;
}

function h($text) {
    return htmlspecialchars((string) $text, ENT_QUOTES);
}

function page($script, $title, $body) {
    header('Content-Type: text/html; charset=utf-8');
    echo "<!doctype html><html><head><meta charset='utf-8'><title>" . h($title) . "</title>$script</head><body>"
        . "<header><nav><a href='/notes'>Notes</a> <a href='/notes/new'>New note</a> <a href='/app'>Quick add</a>"
        . "</nav></header><main>$body</main></body></html>";
}

function first_word($title) {
    return explode(' ', $title, 2)[0];
}

// the save of every form and endpoint: -> the new row's id, or null when nothing was (durably) written
function save($pdo, $title) {
    $word = first_word($title);
    if ($word === 'ghost') {
        return null;  // nothing written, and the caller says it was
    }
    $token = 'tok_' . bin2hex(random_bytes(8));
    if ($word === 'rollback') {
        $pdo->beginTransaction();
        $pdo->prepare('INSERT INTO notes (title, api_token) VALUES (?, ?)')->execute([$title, $token]);
        $pdo->rollBack();  // never committed
        return null;
    }
    $pdo->prepare('INSERT INTO notes (title, api_token) VALUES (?, ?)')->execute([$title, $token]);
    return (int) $pdo->lastInsertId();
}

function note($pdo, $id) {
    $q = $pdo->prepare('SELECT id, title FROM notes WHERE id = ?');
    $q->execute([$id]);
    return $q->fetch() ?: null;
}

// the row a rename writes: its own, or for a "wrongrow" title the one before it (else the smallest other id)
function rename_target($pdo, $id, $title) {
    if (!str_starts_with($title, 'wrongrow')) {
        return $id;
    }
    if (note($pdo, $id - 1) !== null) {
        return $id - 1;
    }
    $q = $pdo->prepare('SELECT MIN(id) AS id FROM notes WHERE id <> ?');
    $q->execute([$id]);
    $other = $q->fetch();
    return $other && $other['id'] !== null ? (int) $other['id'] : null;
}

function new_form($script, $message, $title) {
    page($script, 'New note', "<h1>New note</h1>$message"
        . "<form method='post' action='/notes/new'><label>Title <input name='title' value='" . h($title) . "'>"
        . "</label><button>Save note</button></form>");
}

function rename_form($script, $note, $message, $title) {
    page($script, 'Rename note', "<h1>Rename note</h1>$message"
        . "<form method='post' action='/notes/" . (int) $note['id'] . "/rename'><label>Title <input name='title' value='"
        . h($title) . "'></label><button>Rename</button></form>");
}

function not_found($script) {
    http_response_code(404);
    page($script, 'Not found', '<h1>Not found</h1>');
}

function json_out($status, $data) {
    http_response_code($status);
    header('Content-Type: application/json');
    echo json_encode($data);
}

const TOO_SHORT = 'Title must be at least 2 characters.';
const FLASHES = ['saved' => 'Note saved.', 'renamed' => 'Note renamed.'];

$app_page = <<<'HTML'
<h1>Quick add</h1>
<form id="add"><label for="title">Title</label> <input id="title" name="title"> <button>Add</button></form>
<p role="status" id="status"></p>
<ul id="notes">%s</ul>
<script>
document.getElementById('add').addEventListener('submit', function (event) {
  event.preventDefault();
  var input = document.getElementById('title'), status = document.getElementById('status');
  status.textContent = '';
  fetch('/api/notes', {method: 'POST', headers: {'Content-Type': 'application/json'},
                       body: JSON.stringify({title: input.value})})
    .then(function (resp) { return resp.json(); })
    .then(function (data) {
      if (!data.ok) { status.textContent = data.error || 'Could not save.'; return; }
      status.textContent = 'Saved!';
      var li = document.createElement('li');
      if (data.id) { li.dataset.id = data.id; }
      li.textContent = input.value;
      document.getElementById('notes').appendChild(li);
      input.value = '';
    })
    .catch(function () { status.textContent = 'Could not save.'; });
});
</script>
HTML;

try {
    $pdo = db($dsn);
    if ($path === '/') {
        header('Location: /notes', true, 302);
    } elseif ($path === '/notes' && $method === 'GET') {
        $items = '';
        foreach ($pdo->query('SELECT id, title FROM notes ORDER BY id') as $row) {
            $items .= "<li data-id='" . (int) $row['id'] . "'><a href='/notes/" . (int) $row['id'] . "/edit'>"
                . h($row['title']) . "</a></li>";
        }
        $flash = FLASHES[$_GET['flash'] ?? ''] ?? null;
        page($script, 'Notes', '<h1>Notes</h1>' . ($flash ? "<p class='flash' role='status'>$flash</p>" : '')
            . "<ul id='notes'>$items</ul><p><a href='/notes/new'>New note</a></p>");
    } elseif ($path === '/notes/new' && $method === 'GET') {
        new_form($script, '', '');
    } elseif ($path === '/notes/new' && $method === 'POST') {
        $title = trim($_POST['title'] ?? '');
        if (strlen($title) < 2) {
            new_form($script, "<p class='error'>" . TOO_SHORT . "</p>", $title);
        } else {
            save($pdo, $title);
            header('Location: /notes?flash=saved', true, 303);
        }
    } elseif (preg_match('#^/notes/(\d+)/edit$#', $path, $m) && $method === 'GET') {
        $note = note($pdo, (int) $m[1]);
        $note ? rename_form($script, $note, '', $note['title']) : not_found($script);
    } elseif (preg_match('#^/notes/(\d+)/rename$#', $path, $m) && $method === 'POST') {
        $note = note($pdo, (int) $m[1]);
        $title = trim($_POST['title'] ?? '');
        if ($note === null) {
            not_found($script);
        } elseif (strlen($title) < 2) {
            rename_form($script, $note, "<p class='error'>" . TOO_SHORT . "</p>", $title);
        } else {
            $target = rename_target($pdo, (int) $note['id'], $title);
            if ($target !== null) {
                $pdo->prepare('UPDATE notes SET title = ? WHERE id = ?')->execute([$title, $target]);
            }
            header('Location: /notes?flash=renamed', true, 303);
        }
    } elseif ($path === '/api/notes' && $method === 'POST') {
        $body = json_decode(file_get_contents('php://input'), true);
        $title = is_array($body) && is_string($body['title'] ?? null) ? trim($body['title']) : null;
        if ($title === null) {
            json_out(400, ['ok' => false, 'error' => 'Send JSON {"title": "..."}.']);
        } elseif (strlen($title) < 2) {
            json_out(422, ['ok' => false, 'error' => TOO_SHORT]);
        } else {
            $id = save($pdo, $title);
            json_out(201, $id === null ? ['ok' => true] : ['ok' => true, 'id' => $id]);
        }
    } elseif ($path === '/app' && $method === 'GET') {
        $items = '';
        foreach ($pdo->query('SELECT id, title FROM notes ORDER BY id') as $row) {
            $items .= "<li data-id='" . (int) $row['id'] . "'>" . h($row['title']) . "</li>";
        }
        page($script, 'Quick add', sprintf($app_page, $items));
    } else {
        not_found($script);
    }
} catch (Throwable $e) {
    error_log('notes: ' . get_class($e) . ': ' . $e->getMessage());
    if (!headers_sent()) {
        http_response_code(500);
    }
    echo 'Something went wrong.';
}
