// The bench's measure of the operations console in Debian's Chromium (headless): for each of N loads,
// the time to its heading, and the time from "Show" to the columns drawn from the API. Prints
// the medians as JSON. Called by the bench with: node first-render.mjs <base url> <key> <loads>
import { launch } from "./chromium.mjs";

const [base, key, loads] = process.argv.slice(2);
const context = await launch("ops-console-bench");
const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
try {
  const [heading, columns] = [[], []];
  for (let i = 0; i < Number(loads); i++) {
    const page = await context.newPage();
    const started = Date.now();
    await page.goto(base + "/console");
    await page.getByRole("heading", { name: "Operations console" }).waitFor();
    heading.push(Date.now() - started);
    await page.getByLabel("API key", { exact: true }).fill(key);
    const shown = Date.now();
    await page.getByRole("button", { name: "Show", exact: true }).click();
    await page.locator("#status", { hasText: "Updated" }).waitFor();
    columns.push(Date.now() - shown);
    await page.evaluate(() => sessionStorage.clear());
    await page.close();
  }
  console.log(JSON.stringify({ heading_p50_ms: median(heading), columns_p50_ms: median(columns) }));
} finally {
  await context.close();
}
