  // == Section: commands == the bridge commands by name
  // uses: N (01), clip (03), redactUrl (03), internal (04), COMMANDS (05), snapshot (08), inspectCmd (09),
  //   queryCmd (09), act (10), actSequence (10), hydratedCmd (10), setFaults (12), alertsRead (13),
  //   announceDocument (15), storageRead (17), capabilities (19), stateRead (19), evalProbe (20)
  // ---- command table -------------------------------------------------------------------------
  COMMANDS.snapshot = snapshot;
  COMMANDS.query = queryCmd;
  COMMANDS.inspect = inspectCmd;
  COMMANDS.act = act;
  COMMANDS.hydrated = hydratedCmd;
  COMMANDS.act_sequence = actSequence;
  COMMANDS.state_read = stateRead;
  COMMANDS.storage_read = storageRead;
  COMMANDS.capabilities = capabilities;
  COMMANDS.eval_probe = evalProbe;
  COMMANDS.alerts_read = alertsRead;
  COMMANDS.fault_set = setFaults;
  COMMANDS.ping = function () {
    return { pong: true };
  };
  COMMANDS.navigate = function (a) {
    var u;
    try {
      u = new URL(String(a.url), location.href);
    } catch (e) {
      return { ok: false, reason: 'not a valid URL: ' + clip(a.url, 200) };
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      return { ok: false, reason: 'only http(s) URLs can be opened (got ' + u.protocol + ')' };
    var target = u.href;
    if (!(N.split(u.href, '#')[0] === N.split(location.href, '#')[0] && u.hash)) {
      // announced now, beside this command's answer: a frame sent while the page unloads can be lost
      announceDocument({ url: redactUrl(target), method: 'GET', cause: 'navigate', navigationType: 'navigate' });
    }
    // answer first: the result frame must leave before the page unloads
    N.setTimeout(function () {
      try {
        if (N.split(u.href, '#')[0] === N.split(location.href, '#')[0] && u.hash) location.hash = u.hash;
        else location.assign(target);
      } catch (e) {
        internal('command', e);
      }
    }, 30);
    return { ok: true, url: redactUrl(target), from: redactUrl(location.href) };
  };
  COMMANDS.refresh = function (a) {
    announceDocument({ url: redactUrl(location.href), method: 'GET', cause: 'reload', navigationType: 'reload' });
    N.setTimeout(function () {
      try {
        if (a.hard) {
          var u = new URL(location.href);
          N.set(u.searchParams, '_reticle_reload', String(N.dateNow()));
          location.replace(u.href);
        } else location.reload();
      } catch (e) {
        internal('command', e);
      }
    }, 30);
    return { ok: true, hard: !!a.hard };
  };

