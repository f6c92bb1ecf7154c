// Drives the live board in Debian's Chromium, headless, as an operator would: types the key,
// sees an operation waiting, reads what it moves, approves it from the page and watches it
// change column; sees an API refusal worded as the API words it; then, as the platform's
// operator, resends a webhook delivery whose retries ran out from the exceptions list.
// The platform's operator picks a customer by name, a suspended one marked. Called by
// tests/api/board_page.rs:
//   node board.mjs <base url> <approver key> <operation id> <output dir> <platform key> <work item id> <suspended customer id>
import { join } from "node:path";
import { launch } from "./chromium.mjs";

const [base, key, operationId, output, platformKey, exceptionId, suspendedId] = process.argv.slice(2);
const context = await launch("ops-board-chromium");
const fail = async (page, message) => {
  await page.screenshot({ path: join(output, "board-failure.png"), fullPage: true });
  throw new Error(message);
};
try {
  const page = await context.newPage();
  const started = Date.now();
  await page.goto(base + "/board");
  await page.getByRole("heading", { name: "Operations board" }).waitFor();
  console.log(`first render: ${Date.now() - started} ms`);

  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Show" }).click();
  const waiting = page.locator(`#column-pending li[data-id="${operationId}"]`);
  await waiting.waitFor({ timeout: 5000 }).catch(() => fail(page, "the waiting operation is not in Pending approval"));
  await page.screenshot({ path: join(output, "board.png"), fullPage: true });

  // Money is shown in the currency's major unit, as people read it: the API's 125000 CLP has
  // no minor unit, 250000 USD cents are 2,500.00 dollars, a dinar has three digits.
  const shown = await waiting.locator("span.muted").textContent();
  if (shown !== "payout 125,000 CLP") await fail(page, `the waiting payout is shown as "${shown}"`);
  // The board's sums come as decimal strings, past 2^53 and 2^64, and are shown to the unit.
  const amounts = await page.evaluate(() => [amount(250000, "USD"), amount(5, "USD"), amount(1234567, "KWD"), amount(999999999999000, "CLP"),
    amount("18446744073709551617", "CLP"), amount("-36893488147419103233", "USD")]);
  const expected = ["2,500.00 USD", "0.05 USD", "1,234.567 KWD", "999,999,999,999,000 CLP",
    "18,446,744,073,709,551,617 CLP", "-368,934,881,474,191,032.33 USD"];
  if (amounts.join("|") !== expected.join("|")) await fail(page, `amounts are shown as ${amounts.join(", ")}`);

  // Before signing, the approver reads what it moves: each item's amount, beneficiary, rail
  // and account (masked to its last four characters) and reference, and the signatures needed.
  await waiting.locator("button.open").click();
  const item = page.locator("#items li").first();
  await item.waitFor({ timeout: 3000 }).catch(() => fail(page, "the waiting operation's items were not shown"));
  const itemText = await item.textContent();
  if (itemText !== "125,000 CLP to RUT 7654321-0 at psp-local:sandbox ••••3450 · salary 0") {
    await fail(page, `the item is shown as "${itemText}"`);
  }
  const summary = await page.locator("#detail-summary").textContent();
  if (!summary.startsWith("payout 125,000 CLP for ") || !summary.includes(" · workflow two_step · approvals 0 of 1 (approver) · created by key_")) {
    await fail(page, `the operation is summed up as "${summary}"`);
  }

  // An API refusal is shown as the API words it: a rejection without a reason.
  page.once("dialog", (dialog) => dialog.dismiss());
  await waiting.getByRole("button", { name: "Reject" }).click();
  await page.locator("#error", { hasText: "reason" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the API's refusal was not shown"));

  // Approve from the page: the columns show the change by themselves (the page reads the board
  // each second; the test allows 4 s, as its machine runs the rest of the suite meanwhile).
  await waiting.getByRole("button", { name: "Approve" }).click();
  const approvedAt = Date.now();
  await page.locator(`#column-progress li[data-id="${operationId}"]`).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the approved operation did not move to In progress"));
  await waiting.waitFor({ state: "detached", timeout: 4000 });
  console.log(`moved column: ${Date.now() - approvedAt} ms after the approval`);

  // Its history, with causes and actors, is one click away, and its transaction with the
  // rail's reference once the rail took it.
  await page.locator(`#column-progress li[data-id="${operationId}"] button.open`).click();
  await page.locator("#history li", { hasText: "approved" }).first().waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the operation's history was not shown"));
  await page.locator("#transactions li", { hasText: "psp-local:sandbox ref sbx_" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the transaction's rail reference was not shown"));
  await page.locator("#transactions li", { hasText: "settles 20" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the transaction's settlement day was not shown"));
  await page.screenshot({ path: join(output, "board-approved.png"), fullPage: true });

  // The customer's user sees its exception but may not work it: the API's refusal is shown.
  const exception = page.locator(`#exceptions li[data-id="${exceptionId}"]`);
  await exception.waitFor({ timeout: 3000 }).catch(() => fail(page, "the failed delivery is not in Exceptions"));
  await exception.getByRole("button", { name: "Resend" }).click();
  await page.locator("#error", { hasText: "platform_only" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the refusal to a customer's user was not shown"));
  // The platform's operator resends it: the item leaves the list.
  await page.getByLabel("API key").fill(platformKey);
  await page.getByRole("button", { name: "Show" }).click();
  await exception.getByRole("button", { name: "Resend" }).click();
  await exception.waitFor({ state: "detached", timeout: 4000 })
    .catch(() => fail(page, "the resent delivery's exception did not close"));
  await page.screenshot({ path: join(output, "board-resent.png"), fullPage: true });

  // The platform's key lists its customers for the filter, by name; a suspended one is marked.
  // (A customer's key could not list them: its field takes an id as typed.)
  const suspended = page.locator(`#customers option[value="${suspendedId}"]`);
  await suspended.waitFor({ state: "attached", timeout: 3000 })
    .catch(() => fail(page, "the suspended customer is not offered in the filter"));
  if ((await suspended.textContent()) !== "Globex (suspended)") {
    await fail(page, `the suspended customer is offered as "${await suspended.textContent()}"`);
  }
  console.log(`screenshots: ${join(output, "board.png")}, ${join(output, "board-approved.png")}, ${join(output, "board-resent.png")}`);
} finally {
  await context.close();
}
