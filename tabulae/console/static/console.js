// The console's only script: everything works without it; it adds comfort.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // "Add a property row": a copy of the last row, emptied, with the next index.
  for (const button of document.querySelectorAll("[data-add-row]")) {
    button.addEventListener("click", () => {
      const body = button.closest("form").querySelector("table.props tbody");
      const rows = body.querySelectorAll("tr.prop");
      const last = rows[rows.length - 1];
      const copy = last.cloneNode(true);
      const next = rows.length;
      for (const field of copy.querySelectorAll("[name]")) {
        field.name = field.name.replace(/\.\d+$/, "." + next);
        if (field.tagName === "SELECT") field.selectedIndex = 0; else field.value = "";
      }
      body.appendChild(copy);
      copy.querySelector("input").focus();
    });
  }
  // Forms that destroy something ask first.
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
});
