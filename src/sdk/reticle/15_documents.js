  // == Section: documents == routes, the document request that leaves and the one that arrives
  // provides: lastHref, routeChanged, installRouting, DOC_KEY, DOC_LINK_MS, docIntent, docAnnounced,
  //   lastSubmit, programmaticSubmit, DOC_FIELDS, sameDocUrl, samePath, formProp, formRecord,
  //   announceDocument, installDocuments, docOnSubmit, docOnFormData, docSubmitWrapper, docOnClick,
  //   docOnNavigate, docLeaving, docArrival, docAnnouncedBefore, docLinked, docTiming
  // uses: BODY_CAP (01), N (01), REDACTED (01), clip (03), hasOwn (03), isObj (03), keySensitive (03),
  //   rand36 (03), redactUrl (03), scrub (03), ssGet (03), ssSet (03), S (04), emit (04), flush (04),
  //   MARK (05), markDocument (05), markable (05), takeMark (05), getName (07), isSecretField (07),
  //   listen (11), patch (11), rememberPostedForm (13)
  // -- routing
  var lastHref = location.href;
  function routeChanged(kind) {
    var to = location.href;
    if (to === lastHref) return;
    var from = lastHref;
    lastHref = to;
    emit('route.change', {
      from: redactUrl(from),
      to: redactUrl(to),
      kind: kind,
      pathname: location.pathname,
      search: redactUrl(location.search),
      hash: redactUrl(location.hash),
      title: document.title
    });
  }
  function installRouting() {
    lastHref = location.href;
    N.forEach(['pushState', 'replaceState'], function (m) {
      patch(history, m, function (orig) {
        return function () {
          var r = N.apply(orig, this, arguments);
          try {
            routeChanged(m === 'pushState' ? 'push' : 'replace');
          } catch (e) {
            /* ignore */
          }
          return r;
        };
      });
    });
    listen(window, 'popstate', function () {
      var same = N.split(location.href, '#')[0] === N.split(lastHref, '#')[0];
      routeChanged(
        same &&
          location.hash !==
            (N.indexOf(lastHref, '#') >= 0 ? N.slice(lastHref, N.indexOf(lastHref, '#')) : '')
          ? 'hash'
          : 'pop'
      );
    });
    listen(window, 'hashchange', function () {
      routeChanged('hash');
    });
  }

  // -- documents: the request that replaces this page, and the arrival of the next one
  // A full-page navigation takes this document (and its socket) away. So the request that
  // leaves it is announced before it starts: a form post as soon as its submit event has run
  // uncancelled (the `formdata` event), anything else at `beforeunload`, as a `net.pending` with
  // initiator "document". The record also goes into sessionStorage, keyed by tab, so that the
  // next document can report the same request id with what only it can read: Navigation Timing's
  // status, redirect count and navigation type.
  var DOC_KEY = '__reticle_doc_pending';
  var DOC_LINK_MS = 120000; // an announced navigation older than this is not linked to an arrival
  var docIntent = null; // the latest hint of where a navigation goes
  var docAnnounced = null; // the document request this page already announced
  var lastSubmit = null; // {ev, form, submitter} of the latest submit event
  var programmaticSubmit = null; // the form whose submit() is running
  var DOC_FIELDS = [
    'action',
    'enctype',
    'fields',
    'form',
    'submitter',
    'link',
    'requestBody',
    'requestBodyTruncated'
  ];
  // Two URLs name the same document: fragments and our hard-reload marker aside.
  function sameDocUrl(a, b) {
    function bare(u) {
      return N.replace(N.replace(N.split(String(u || ''), '#')[0], /([?&])_reticle_reload=\d+&?/, '$1'), /[?&]$/, '');
    }
    return bare(a) === bare(b);
  }
  function samePath(a, b) {
    return N.split(String(a || ''), /[?#]/)[0] === N.split(String(b || ''), /[?#]/)[0];
  }
  // A form's own IDL attribute, never a control named like it (<select name="action">).
  function formProp(form, key) {
    try {
      return N.call(N.descOf(N.HTMLFormElement.prototype, key).get, form);
    } catch (e) {
      return '';
    }
  }
  // A form submission as the browser will send it: method, action URL, field names and values
  // (redacted as request bodies are: passwords, hidden fields, secret-looking names), the
  // submitter's name and text.
  function formRecord(form, submitter, fd) {
    var sub = submitter && submitter.form === form ? submitter : null;
    var method = N.toUpperCase(String(
      (sub && N.hasAttribute(sub, 'formmethod') && sub.formMethod) || formProp(form, 'method') || 'get'
    ));
    var action =
      (sub && N.hasAttribute(sub, 'formaction') && sub.formAction) ||
      formProp(form, 'action') ||
      location.href;
    var target = (sub && N.getAttribute(sub, 'formtarget')) || N.getAttribute(form, 'target') || '';
    var enctype =
      (sub && N.hasAttribute(sub, 'formenctype') && sub.formEnctype) || formProp(form, 'enctype');
    var names = [],
      pairs = [],
      n = 0;
    N.forEach(fd, function (v, k) {
      if (n++ >= 100) return;
      if (N.indexOf(names, k) < 0 && names.length < 50) N.push(names, k);
      var ctl = null;
      try {
        ctl = N.namedItem(formProp(form, 'elements'), k);
        if (ctl && ctl.nodeType !== 1) ctl = ctl[0] || null; // a RadioNodeList
      } catch (e) {
        /* odd name */
      }
      var secret = keySensitive(k) || (!!ctl && isSecretField(ctl));
      var val =
        typeof v === 'string'
          ? secret
            ? REDACTED
            : clip(scrub(v), 500)
          : '[File ' + (v.name || '') + ' ' + (v.size || 0) + 'B]';
      N.push(pairs, [k, val]);
    });
    var body = N.join(N.map(pairs, function (p) {
        var v = N.replace(encodeURIComponent(p[1]), /%5Bredacted%5D/g, REDACTED);
        return encodeURIComponent(p[0]) + '=' + v;
      }), '&');
    var url = action;
    if (method === 'GET') {
      try {
        var u = new URL(action, location.href);
        u.search = N.join(N.map(pairs, function (p) {
            return encodeURIComponent(p[0]) + '=' + encodeURIComponent(p[1]);
          }), '&');
        url = u.href;
      } catch (e) {
        /* keep the action */
      }
    }
    var rec = {
      method: method,
      url: redactUrl(url),
      action: redactUrl(action),
      target: target,
      enctype: enctype,
      fields: names,
      form: {
        name: clip(getName(form, 'form') || N.getAttribute(form, 'name') || form.id || '', 80)
      }
    };
    if (method !== 'GET') {
      rec.requestBody = clip(body, BODY_CAP);
      if (body.length > BODY_CAP) rec.requestBodyTruncated = true;
    }
    if (sub) {
      rec.submitter = { text: clip(getName(sub), 80) };
      if (sub.name) rec.submitter.name = sub.name;
    }
    return rec;
  }
  function announceDocument(rec) {
    var id = 'd' + rand36(8);
    var d = {
      id: id,
      requestId: id,
      method: rec.method || null,
      methodKnown: !!rec.method,
      url: rec.url || '',
      urlKnown: !!rec.url,
      initiator: 'document',
      cause: rec.cause,
      navigationType: rec.navigationType || 'navigate'
    };
    N.forEach(DOC_FIELDS, function (k) {
      if (rec[k] != null) d[k] = rec[k];
    });
    if (rec.requestBody != null) d.requestBodyType = rec.enctype;
    if (MARK.on && (!rec.url || markable(rec.url))) {
      var mark = takeMark();
      if (mark) markDocument(mark, rec.url);
      d.serverMarked = true;
      if (mark) d.serverMark = mark[0];
    }
    docAnnounced = { id: id, at: N.dateNow(), method: d.method, url: d.url, cause: d.cause };
    // the record first: the emit below may not leave before the page goes
    var keep = {};
    for (var k in d) if (hasOwn(d, k)) keep[k] = d[k];
    keep.at = N.dateNow();
    keep.from = redactUrl(location.href);
    keep.documentId = S.documentId;
    try {
      ssSet(DOC_KEY, N.stringify(keep));
    } catch (e) {
      /* no storage */
    }
    emit('net.pending', d);
    flush();
  }
  function installDocuments() {
    listen(window, 'submit', docOnSubmit, true);
    // `formdata` fires while the browser builds the entry list of a submission that goes ahead:
    // after an uncancelled submit event has finished dispatching, or inside form.submit(). A
    // `new FormData(form)` in the app's own submit handler fires it too, mid-dispatch: not ours.
    listen(window, 'formdata', docOnFormData, true);
    if (window.HTMLFormElement && HTMLFormElement.prototype.submit)
      patch(HTMLFormElement.prototype, 'submit', docSubmitWrapper);
    listen(window, 'click', docOnClick);
    // The Navigation API (Chromium) names the destination of every navigation this document
    // starts, a location change or a reload included.
    try {
      if (window.navigation && typeof window.navigation.addEventListener === 'function')
        listen(window.navigation, 'navigate', docOnNavigate);
    } catch (e) {
      /* no Navigation API */
    }
    listen(window, 'beforeunload', docLeaving, true);
    listen(
      window,
      'pagehide',
      function (e) {
        if (!e.persisted && !(docAnnounced && N.dateNow() - docAnnounced.at < 10000)) docLeaving();
      },
      true
    );
    docArrival();
  }
  function docOnSubmit(e) {
    if (e.target && e.target.tagName === 'FORM')
      lastSubmit = { ev: e, form: e.target, submitter: e.submitter || null };
  }
  function docOnFormData(e) {
    var form = e.target;
    if (!form || form.tagName !== 'FORM' || !e.formData) return;
    var ls = lastSubmit,
      submitter = null;
    if (programmaticSubmit === form) submitter = null;
    else if (ls && ls.form === form && ls.ev.eventPhase === 0 && !ls.ev.defaultPrevented)
      submitter = ls.submitter;
    else return;
    lastSubmit = null;
    var rec = formRecord(form, submitter, e.formData);
    if (rec.method === 'DIALOG') return;
    if (rec.target && !N.test(/^_(self|top|parent)$/i, rec.target)) return; // another window
    rec.cause = 'form';
    if (rec.method === 'POST') rememberPostedForm(form);
    announceDocument(rec);
  }
  function docSubmitWrapper(orig) {
    return function submit() {
      programmaticSubmit = this;
      try {
        return N.apply(orig, this, arguments);
      } finally {
        programmaticSubmit = null;
      }
    };
  }
  function docOnClick(e) {
    if (e.defaultPrevented || e.button) return;
    var a = e.target && e.target.closest ? N.closest(e.target, 'a[href]') : null;
    if (!a || N.hasAttribute(a, 'download')) return;
    var tg = N.getAttribute(a, 'target');
    if (tg && !N.test(/^_(self|top|parent)$/i, tg)) return;
    if (e.ctrlKey || e.metaKey || e.shiftKey) return;
    docIntent = {
      url: a.href,
      method: 'GET',
      cause: 'link',
      at: N.dateNow(),
      text: clip(getName(a), 80)
    };
  }
  function docOnNavigate(e) {
    if (e.hashChange || e.downloadRequest != null) return;
    var dest = e.destination && e.destination.url;
    var prev =
      docIntent && N.dateNow() - docIntent.at < 1000 && sameDocUrl(docIntent.url, dest)
        ? docIntent
        : null;
    docIntent = {
      url: dest,
      method: e.formData ? 'POST' : 'GET',
      cause: prev ? prev.cause : e.navigationType === 'reload' ? 'reload' : 'navigate',
      navigationType: e.navigationType,
      at: N.dateNow(),
      text: prev ? prev.text : undefined
    };
  }
  // This document is going away: announce where to, as far as the latest intent tells.
  function docLeaving() {
    if (docAnnounced && N.dateNow() - docAnnounced.at < 2000) return; // the form post, just now
    var it = docIntent && N.dateNow() - docIntent.at < 5000 ? docIntent : null;
    var rec = it
      ? {
          url: redactUrl(it.url),
          method: it.method,
          cause: it.cause,
          navigationType: it.navigationType
        }
      : { url: '', method: null, cause: 'unknown' };
    if (it && it.text) rec.link = { text: it.text };
    docIntent = null;
    announceDocument(rec);
  }
  // This document's own request, from Navigation Timing, linked to the announced one.
  function docArrival() {
    var nav = null;
    try {
      nav = N.getEntriesByType(performance, 'navigation')[0] || null;
    } catch (e) {
      nav = null;
    }
    var type = nav && nav.type ? String(nav.type) : 'navigate';
    var here = redactUrl(location.href);
    var redirects = nav && nav.redirectCount > 0 ? nav.redirectCount : 0;
    var status = nav && nav.responseStatus > 0 ? nav.responseStatus : null;
    var prev = docAnnouncedBefore();
    var linked = docLinked(prev, here, type, redirects);
    var id = linked && prev.requestId ? prev.requestId : 'd' + S.documentId;
    var d = {
      id: id,
      requestId: id,
      method: linked && prev.methodKnown ? prev.method : null,
      methodKnown: !!(linked && prev.methodKnown),
      url: linked && prev.urlKnown && !sameDocUrl(prev.url, here) ? prev.url : here,
      finalUrl: here,
      status: status,
      statusKnown: status != null,
      ok: status == null ? null : status >= 200 && status < 400,
      initiator: 'document',
      navigationType: type,
      redirectCount: redirects,
      redirected: redirects > 0,
      linked: linked,
      documentId: S.documentId
    };
    if (linked) {
      d.cause = prev.cause;
      d.sincePendingMs = N.max(0, N.dateNow() - prev.at);
      if (prev.from) d.from = prev.from;
      if (prev.documentId) d.fromDocumentId = prev.documentId;
      N.forEach(N.concat(DOC_FIELDS, ['requestBodyType']), function (k) {
        if (prev[k] != null) d[k] = prev[k];
      });
    }
    if (nav) docTiming(d, nav, redirects);
    emit('net.request', d);
    var from =
      linked && prev.from ? prev.from : document.referrer ? redactUrl(document.referrer) : '';
    emit('route.change', {
      from: from,
      to: here,
      kind: 'document',
      reason: 'document',
      navigationType: type,
      requestId: id,
      pathname: location.pathname,
      search: redactUrl(location.search),
      hash: redactUrl(location.hash),
      title: document.title
    });
    lastHref = location.href;
  }
  // The request the previous document announced (taken out of sessionStorage), or null.
  function docAnnouncedBefore() {
    var prev = null;
    try {
      prev = N.parse(ssGet(DOC_KEY) || 'null');
    } catch (e) {
      prev = null;
    }
    if (prev) ssSet(DOC_KEY, '');
    return prev;
  }
  // Whether the announced request is the one that brought this document.
  function docLinked(prev, here, type, redirects) {
    return (
      !!prev &&
      isObj(prev) &&
      N.dateNow() - (prev.at || 0) < DOC_LINK_MS &&
      (sameDocUrl(prev.url, here) ||
        (prev.cause === 'form' && prev.method === 'GET' && samePath(prev.url, here)) ||
        redirects > 0 ||
        !prev.urlKnown ||
        (type === 'reload' && prev.navigationType === 'reload') ||
        (type === 'back_forward' && prev.navigationType === 'traverse'))
    );
  }
  // Navigation Timing's durations, sizes and content type on the document's net.request.
  function docTiming(d, nav, redirects) {
    var end = nav.responseEnd > 0 ? nav.responseEnd : nav.responseStart;
    d.durationMs = N.round(N.max(0, end - nav.startTime));
    d.ms = d.durationMs;
    d.ttfbMs = N.round(N.max(0, nav.responseStart - (nav.requestStart || nav.startTime)));
    if (redirects) d.redirectMs = N.round(N.max(0, nav.redirectEnd - nav.redirectStart));
    if (nav.transferSize != null) d.transferSize = nav.transferSize;
    if (nav.contentType) d.contentType = nav.contentType;
  }

