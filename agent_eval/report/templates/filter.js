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
  filter.hidden = false;
  apply();
})();
