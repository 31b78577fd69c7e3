// The compare page: "show only those" hides the rows where both sides did and saw the same.
(() => {
  'use strict';
  const box = document.getElementById('only-differ');
  const table = document.getElementById('pairs');
  if (box && table) box.addEventListener('change', () => table.classList.toggle('only-differ', box.checked));
})();
