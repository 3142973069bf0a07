<?php
// A plain PHP 8 notes form, as PHP sites write one: the form posts to itself; a good title is appended to
// notes.json (a JSON-file store, nothing a server hook could watch) and redirects (303) to /done; a bad one
// renders the form again under 200 with <p class="error"> above it; the title "quiet" renders it again and
// says nothing.  Run with `php -S 127.0.0.1:PORT index.php` and RETICLE_SCRIPT (the script tag, or empty).
$store = getenv('NOTES_FILE');
$script = getenv('RETICLE_SCRIPT') ?: '';
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);

function render($script, $message, $title) {
    $t = htmlspecialchars($title, ENT_QUOTES);
    echo "<!doctype html><html><head><title>New note</title>$script</head><body>"
        . "<header><nav><a href='/'>Home</a></nav></header><main><h1>New note</h1>$message"
        . "<form method='post' action='/notes/new'><label>Title <input name='title' value='$t'></label>"
        . "<button>Save note</button></form></main></body></html>";
}

if ($path === '/done') {
    echo "<!doctype html><html><head><title>Done</title>$script</head><body><p>Note saved.</p></body></html>";
} elseif ($path === '/notes/new' && $_SERVER['REQUEST_METHOD'] === 'POST') {
    $title = trim($_POST['title'] ?? '');
    if ($title === 'quiet') {
        render($script, '', $title);
    } elseif (strlen($title) < 2) {
        render($script, "<p class='error'>Title must be at least 2 characters.</p>", $title);
    } else {
        $notes = file_exists($store) ? json_decode(file_get_contents($store), true) : [];
        $notes[] = ['title' => $title];
        file_put_contents($store, json_encode($notes));
        header('Location: /done', true, 303);
    }
} elseif ($path === '/notes/new') {
    render($script, '', '');
} else {
    http_response_code(404);
    echo 'not found';
}
