(function () {
  function all(s) { var o = []; for (var i = 0; i < s.length; i++) { var k = s.key(i);
    if (k !== /*__MARK__*/'') o.push([k, s.getItem(k)]); } return o; }
  return {origin: location.origin, localStorage: all(localStorage), sessionStorage: all(sessionStorage)};
})()