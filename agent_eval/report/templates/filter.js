(function () {
  "use strict";
  var filter = document.getElementById("filter");
  if (!filter) { return; }
  var task = filter.querySelector("select[name=task]");
  var outcome = filter.querySelector("select[name=outcome]");
  var count = document.getElementById("filter-count");
  var items = document.querySelectorAll("[data-filter-task]");
  function apply() {
    var t = task.value, o = outcome.value, attempts = 0, shown = 0;
    for (var i = 0; i < items.length; i++) {
      var el = items[i];
      var outcomes = el.getAttribute("data-filter-outcomes");
      var keep = (!t || el.getAttribute("data-filter-task") === t) &&
        (!o || outcomes === null || (" " + outcomes + " ").indexOf(" " + o + " ") >= 0);
      el.hidden = !keep;
      if (el.classList.contains("attempt")) { attempts++; if (keep) { shown++; } }
    }
    count.textContent = (t || o) ? shown + " of " + attempts + " attempts shown" : "";
  }
  task.addEventListener("change", apply);
  outcome.addEventListener("change", apply);
  filter.querySelector("button").addEventListener("click", function () {
    task.value = "";
    outcome.value = "";
    apply();
  });
  // A link into a folded attempt (a finding's source line, a review item) unfolds it.
  function reveal() {
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    for (var el = target; el; el = el.parentElement) {
      if (el.tagName === "DETAILS") { el.open = true; }
    }
    if (target) { target.scrollIntoView(); }
  }
  window.addEventListener("hashchange", reveal);
  filter.hidden = false;
  apply();
  reveal();
})();
