(function (origins, mark) {
  try {
    if (sessionStorage.getItem(mark)) return;
    for (var i = 0; i < origins.length; i++) {
      var o = origins[i];
      if (o.origin !== location.origin) continue;
      (o.localStorage || []).forEach(function (kv) { localStorage.setItem(kv[0], kv[1]); });
      (o.sessionStorage || []).forEach(function (kv) { sessionStorage.setItem(kv[0], kv[1]); });
      sessionStorage.setItem(mark, "1");
    }
  } catch (e) {}
})(/*__ORIGINS__*/[], /*__MARK__*/"")