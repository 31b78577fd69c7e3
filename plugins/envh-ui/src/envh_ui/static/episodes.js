// The episodes page: "Compare two" opens the two checked episodes side by side.
document.getElementById('compare').addEventListener('click', () => {
  const picked = [...document.querySelectorAll('.pick:checked')].map(e => e.value);
  const dir = document.getElementById('compare').dataset.dir;
  if (picked.length === 2) location.assign(`/compare/${dir}/${picked[0]}/${picked[1]}`);
});
