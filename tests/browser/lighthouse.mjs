// Lighthouse's accessibility and best-practices audits of the operations console as an operator
// sees it (the key typed in, the board drawn from the API, then each view), in Debian's Chromium through the
// puppeteer-core Lighthouse ships with; prints each category's score and every audit that did
// not pass, and fails below 100. Called by tests/api/console_page.rs:
//   node lighthouse.mjs <base url> <key>
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import puppeteer from "puppeteer-core";
import { startFlow } from "lighthouse";

const [base, key] = process.argv.slice(2);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  userDataDir: mkdtempSync(join(tmpdir(), "ops-console-lighthouse-")),
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage();
  const flow = await startFlow(page, { config: { extends: "lighthouse:default", settings: { onlyCategories: ["accessibility", "best-practices"] } } });
  // The page as loaded, before any key.
  await flow.navigate(base + "/console");
  // The board as an operator works it.
  await page.type("#key", key);
  await page.click("button[type=submit]");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("Updated"));
  await page.click("#column-pending button.open");
  await page.waitForFunction(() => !document.getElementById("detail").hidden);
  await flow.snapshot();
  // Every other view, as drawn from the API (its list filled: rows, or the line saying none).
  for (const view of ["operations", "webhooks", "keys", "schedules", "accounts", "files", "reconciliations", "charts"]) {
    await page.click("#nav-" + view);
    await page.waitForFunction((view) => {
      const section = document.getElementById("view-" + view);
      return !section.hidden && section.querySelector("ul li") !== null;
    }, {}, view);
    await flow.snapshot({ name: view });
  }
  let short = false;
  for (const [step, result] of (await flow.createFlowResult()).steps.entries()) {
    const lhr = result.lhr;
    for (const category of Object.values(lhr.categories)) {
      console.log(`step ${step + 1} (${lhr.gatherMode}${result.name ? " " + result.name : ""}): ${category.id} ${Math.round(category.score * 100)}`);
      if (category.score < 1) short = true;
    }
    for (const audit of Object.values(lhr.audits)) {
      if (audit.score !== null && audit.score < 1 && ["binary", "numeric"].includes(audit.scoreDisplayMode)) {
        console.log(`  not passed: ${audit.id}: ${audit.title}`);
      }
    }
  }
  if (short) process.exitCode = 1;
} finally {
  await browser.close();
}
