// Drives the operations console in Debian's Chromium, headless, as an operator would: an idle
// tab's requests counted for a minute; then types the key, sees an operation waiting, reads
// what it moves, approves it from the page (confirming what it moves) and watches it change
// column; sees an API refusal worded as the API words it; then, as the platform's operator,
// resends a webhook delivery whose retries ran out from the exceptions list. The platform's
// operator picks a customer by name, a suspended one marked. Throughout: no script or style
// the page's policy refuses, axe-core finds no violation, nothing wider than a 360 px screen.
// Called by tests/api/console_page.rs:
//   node console.mjs <base url> <approver key> <operation id> <output dir> <platform key> <work item id> <suspended customer id> <schedule id> <idle seconds>
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { launch } from "./chromium.mjs";

const [base, key, operationId, output, platformKey, exceptionId, suspendedId, scheduleId, idleSeconds] = process.argv.slice(2);
const context = await launch("ops-console-chromium");
const fail = async (page, message) => {
  await page.screenshot({ path: join(output, "console-failure.png"), fullPage: true });
  throw new Error(message);
};
// Anything the page's Content-Security-Policy refused, as Chromium reports it.
const refusedByPolicy = [];
const watch = (page) => page.on("console", (message) => {
  if (message.type() === "error" && message.text().includes("Content Security Policy")) refusedByPolicy.push(message.text());
});
// axe-core, run in the page as it stands (evaluated through the DevTools protocol, which the
// page's policy does not govern): every violation and every check it could not decide, by
// rule and element.
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const accessible = async (page, view) => {
  await page.evaluate(axeSource);
  const result = await page.evaluate(() => window.axe.run(document));
  // Violations, and what axe could not decide either way (it leaves those to a person).
  const found = [...result.violations, ...result.incomplete]
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`);
  console.log(`axe-core on ${view}: ${result.passes.length} rules passed, ${found.length} not`);
  if (found.length) await fail(page, `axe-core on ${view}: ${found.join("; ")}`);
};
const fitsOnAPhone = async (page, view) => {
  const size = page.viewportSize();
  await page.setViewportSize({ width: 360, height: 780 });
  const width = await page.evaluate(() => document.documentElement.scrollWidth);
  await page.setViewportSize(size);
  if (width > 360) await fail(page, `${view} is ${width} px wide on a 360 px screen`);
};
try {
  // First, while the service still asks the rail about it: the transaction whose outcome the
  // rail lost, watched on the platform's board, its operation opened from there.
  const watching = await context.newPage();
  watch(watching);
  await watching.goto(base + "/console");
  await watching.evaluate((key) => sessionStorage.setItem("opsKey", key), platformKey);
  await watching.reload();
  const lost = watching.locator("#unknown li", { hasText: "10,008 CLP at psp-local:sandbox" });
  await lost.waitFor({ timeout: 5000 })
    .catch(async () => fail(watching, `the unknown transaction is not on the board: ${await watching.locator("#unknown").textContent()}`));
  await lost.getByRole("button", { name: "Open" }).click();
  await watching.locator("#detail-title", { hasText: "processing" }).waitFor({ timeout: 3000 })
    .catch(() => fail(watching, "the unknown transaction's operation does not open"));
  await watching.close();

  // An idle tab costs at most a request every two seconds: it reads the changes cursor (the
  // newest event) and reads the rest only when that moved.
  const idle = await context.newPage();
  watch(idle);
  await idle.goto(base + "/console");
  await idle.evaluate((key) => sessionStorage.setItem("opsKey", key), key);
  await idle.reload();
  await idle.locator("#status", { hasText: "Updated" }).waitFor({ timeout: 5000 });
  const requests = [];
  idle.on("request", (request) => requests.push(new URL(request.url()).pathname));
  await idle.waitForTimeout(Number(idleSeconds) * 1000);
  const most = Math.ceil(Number(idleSeconds) / 2) + 1;
  console.log(`an idle tab over ${idleSeconds} s: ${requests.length} requests (${[...new Set(requests)].join(", ")})`);
  if (requests.length > most) await fail(idle, `an idle tab made ${requests.length} requests in ${idleSeconds} s`);
  await idle.close();

  const page = await context.newPage();
  watch(page);
  const started = Date.now();
  // The board's old address takes the operator to the console.
  await page.goto(base + "/board");
  await page.getByRole("heading", { name: "Operations console" }).waitFor();
  console.log(`first render: ${Date.now() - started} ms`);
  if (new URL(page.url()).pathname !== "/console") await fail(page, `/board led to ${page.url()}`);

  await page.getByLabel("API key", { exact: true }).fill(key);
  await page.getByRole("button", { name: "Show", exact: true }).click();
  // Test money says so where no one can miss it.
  const badge = await page.locator("#environment").textContent();
  if (badge !== "TEST") await fail(page, `the environment badge says "${badge}"`);
  const waiting = page.locator(`#column-pending li[data-id="${operationId}"]`);
  await waiting.waitFor({ timeout: 5000 }).catch(() => fail(page, "the waiting operation is not in Pending approval"));
  await page.screenshot({ path: join(output, "console.png"), fullPage: true });

  // Money is shown in the currency's major unit, as people read it: the API's 125000 CLP has
  // no minor unit, 250000 USD cents are 2,500.00 dollars, a dinar has three digits.
  const shown = await waiting.locator("span.muted").textContent();
  // The keyboard: "?" shows the shortcuts; "j" goes down the waiting operations, "a" asks to
  // approve it (declined here), "o" opens it.
  await page.keyboard.press("?");
  await page.locator("#shortcuts", { hasText: "approve it (asks first)" }).waitFor({ timeout: 2000 })
    .catch(() => fail(page, "? did not show the shortcuts"));
  await accessible(page, "the board with its shortcuts shown");
  await page.keyboard.press("?");
  await page.locator("#shortcuts").waitFor({ state: "hidden", timeout: 2000 });
  // (The schedule made a payout of its own: "j" goes down the column to the one waited for.)
  const rows = await page.locator("#column-pending li[data-id]").evaluateAll((items) => items.map((i) => i.dataset.id));
  let focused = null;
  for (let presses = 0; presses <= rows.indexOf(operationId); presses++) {
    await page.keyboard.press("j");
    focused = await page.evaluate(() => document.activeElement.closest("li") && document.activeElement.closest("li").dataset.id);
  }
  if (focused !== operationId) await fail(page, `j went through ${rows.join(", ")} to ${focused}`);
  let keyed = "";
  page.once("dialog", (dialog) => { keyed = dialog.message(); dialog.dismiss(); });
  await page.keyboard.press("a");
  await page.waitForTimeout(300);
  if (!keyed.startsWith(`Approve ${operationId}: `)) await fail(page, `a asked "${keyed}"`);
  await page.keyboard.press("o");
  await page.locator("#detail-title", { hasText: operationId }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "o did not open the operation"));

  // The approvals queue lists the payout's item, open and (three days on, by the service's
  // clock) past its SLA; "c" claims the next approval (the row then says who holds it and
  // offers Release), and Release hands it back.
  const approval = page.locator("#approvals li", { hasText: operationId });
  await approval.filter({ hasText: " · open · past due since " }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the payout's approval is not listed open and past due in the approvals queue"));
  await page.keyboard.press("c");
  await approval.filter({ hasText: "held by usr_" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the claimed approval does not say who holds it"));
  await approval.getByRole("button", { name: "Release" }).click();
  await approval.filter({ hasText: " · open · " }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the released approval is not open again"));

  // With its item count, its one item's reference and its age by the service's clock (three days on).
  if (!/^payout 125,000 CLP · 1 item · salary 0 · 3 d ago$/.test(shown)) await fail(page, `the waiting payout is shown as "${shown}"`);
  // The board's sums come as decimal strings, past 2^53 and 2^64, and are shown to the unit.
  const amounts = await page.evaluate(() => [amount(250000, "USD"), amount(5, "USD"), amount(1234567, "KWD"), amount(999999999999000, "CLP"),
    amount("18446744073709551617", "CLP"), amount("-36893488147419103233", "USD")]);
  const expected = ["2,500.00 USD", "0.05 USD", "1,234.567 KWD", "999,999,999,999,000 CLP",
    "18,446,744,073,709,551,617 CLP", "-368,934,881,474,191,032.33 USD"];
  if (amounts.join("|") !== expected.join("|")) await fail(page, `amounts are shown as ${amounts.join(", ")}`);
  // A payout its payee review holds after the workflow's approval says whom it waits for, and
  // why; the limit's approval is not counted among the workflow's.
  const held = await page.evaluate(() => describeApprovals({
    workflow: "two_step", approval_chain: [{ count: 1, role: "approver" }],
    approvals: [{ user_id: "usr_signer", decision: "approved" }, { user_id: "usr_other", decision: "approved", for_limit: true }],
    limit_hold: { limit: "changed_account", role: "admin", reason: "RUT:1-9 is paid at sbx:2, last at sbx:1" },
  }));
  const heldExpected = "workflow two_step · approvals 1 of 1 (approver): usr_signer · then one approval (admin) for changed account: RUT:1-9 is paid at sbx:2, last at sbx:1";
  if (held !== heldExpected) await fail(page, `a held payout's approvals read "${held}"`);
  // A chain says its steps in the order they are signed.
  const chained = await page.evaluate(() => describeApprovals({
    workflow: "tiers", approval_chain: [{ count: 1, role: "approver" }, { count: 2, role: "treasury", users: ["usr_t1", "usr_t2", "usr_t3"] }],
    approvals: [{ user_id: "usr_signer", decision: "approved" }],
  }));
  const chainedExpected = "workflow tiers · approvals 1 of 3 (1 approver, then 2 treasury among usr_t1, usr_t2, usr_t3): usr_signer";
  if (chained !== chainedExpected) await fail(page, `a chain's approvals read "${chained}"`);

  // Before signing, the approver reads what it moves: each item's amount, beneficiary, rail
  // and account (masked to its last four characters) and reference, and the signatures needed.
  await waiting.locator("button.open").click();
  const item = page.locator("#items li").first();
  await item.waitFor({ timeout: 3000 }).catch(() => fail(page, "the waiting operation's items were not shown"));
  const itemText = await item.textContent();
  if (itemText !== "125,000 CLP to RUT 12345678-5 at psp-local:sandbox ••••3450 · salary 0") {
    await fail(page, `the item is shown as "${itemText}"`);
  }
  const summary = await page.locator("#detail-summary").textContent();
  if (!summary.startsWith("payout 125,000 CLP for Acme") || !summary.includes(" · workflow two_step · approvals 0 of 1 (approver) · created by key_")) {
    await fail(page, `the operation is summed up as "${summary}"`);
  }

  await accessible(page, "the board with an operation open");
  await fitsOnAPhone(page, "the board with an operation open");

  // An API refusal is shown as the API words it: a rejection without a reason. The question
  // names what the operation moves.
  let asked = "";
  page.once("dialog", (dialog) => { asked = dialog.message(); dialog.dismiss(); });
  await waiting.getByRole("button", { name: "Reject" }).click();
  await page.locator("#error", { hasText: "reason" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the API's refusal was not shown"));
  if (!asked.includes("payout of 125,000 CLP in 1 item")) await fail(page, `the rejection asked "${asked}"`);

  // Approving the selected ones asks first too, naming how many, what they move and in how many
  // items.
  await waiting.locator("input[type=checkbox]").check();
  page.once("dialog", (dialog) => { asked = dialog.message(); dialog.dismiss(); });
  await page.getByRole("button", { name: "Approve selected" }).click();
  if (asked !== "Approve 1 operation: 125,000 CLP in 1 item?") await fail(page, `the bulk approval asked "${asked}"`);
  await waiting.locator("input[type=checkbox]").uncheck();

  // Approving asks first, naming the amount and the items; a "no" changes nothing.
  page.once("dialog", (dialog) => { asked = dialog.message(); dialog.dismiss(); });
  await waiting.getByRole("button", { name: "Approve" }).click();
  if (asked !== `Approve ${operationId}: payout of 125,000 CLP in 1 item?`) await fail(page, `the approval asked "${asked}"`);
  await page.waitForTimeout(500);
  if (!(await waiting.isVisible())) await fail(page, "a declined approval approved");

  // Approve from the page: the columns show the change by themselves (the page reads the
  // changes cursor every two seconds; the test allows 6 s, as its machine runs the rest of the
  // suite meanwhile).
  page.once("dialog", (dialog) => dialog.accept());
  await waiting.getByRole("button", { name: "Approve" }).click();
  const approvedAt = Date.now();
  await page.mouse.move(0, 0);
  await page.locator(`#column-progress li[data-id="${operationId}"]`).waitFor({ timeout: 6000 })
    .catch(() => fail(page, "the approved operation did not move to In progress"));
  await waiting.waitFor({ state: "detached", timeout: 6000 });
  console.log(`moved column: ${Date.now() - approvedAt} ms after the approval`);

  // Its history, with causes and actors, is one click away, and its transaction with the
  // rail's reference once the rail took it.
  await page.locator(`#column-progress li[data-id="${operationId}"] button.open`).click();
  await page.locator("#history li", { hasText: "approved" }).first().waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the operation's history was not shown"));
  await page.locator("#transactions li", { hasText: "psp-local:sandbox ref sbx_" }).waitFor({ timeout: 6000 })
    .catch(() => fail(page, "the transaction's rail reference was not shown"));
  await page.locator("#transactions li", { hasText: "settles 20" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the transaction's settlement day was not shown"));
  // Its history's times are the operator's, the UTC instant on hover.
  const stamp = page.locator("#history li time").first();
  const [shownAt, utc] = [await stamp.textContent(), await stamp.getAttribute("title")];
  if (!/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/.test(shownAt) || !/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/.test(utc)) {
    await fail(page, `a history time is shown as "${shownAt}" (hover: "${utc}")`);
  }
  await page.screenshot({ path: join(output, "console-approved.png"), fullPage: true });

  // The customer's user sees its exception but may not work it: the API's refusal is shown.
  const exception = page.locator(`#exceptions li[data-id="${exceptionId}"]`);
  await exception.waitFor({ timeout: 3000 }).catch(() => fail(page, "the failed delivery is not in Exceptions"));
  // An hour past its SLA by the service's clock, it says so.
  if (!(await exception.textContent()).includes("past due since")) await fail(page, "the late exception is not marked past due");
  page.once("dialog", (dialog) => dialog.accept());
  await exception.getByRole("button", { name: "Resend" }).click();
  await page.locator("#error", { hasText: "platform_only" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the refusal to a customer's user was not shown"));
  // The platform's operator resends it: the item leaves the list.
  await page.getByLabel("API key", { exact: true }).fill(platformKey);
  await page.getByRole("button", { name: "Show", exact: true }).click();
  // A rail failure is one row: its operation's item, its transaction's inside it. (Hooli's, and
  // once the service gives up asking, the lost one's.)
  await page.locator("#exceptions > li", { hasText: "operation needs attention" }).filter({ hasText: "transaction txn_" }).first()
    .waitFor({ timeout: 4000 }).catch(async () => fail(page, "the rail failure's transaction item is not inside its operation's row: " + await page.locator("#exceptions").innerText()));
  const apart = await page.evaluate(() => [...document.querySelectorAll("#exceptions > li > strong")]
    .filter((kind) => kind.textContent === "transaction needs attention").length);
  if (apart) await fail(page, "the rail failure's transaction item is also a row of its own");
  page.once("dialog", (dialog) => { asked = dialog.message(); dialog.accept(); });
  await exception.getByRole("button", { name: "Resend" }).click();
  await exception.waitFor({ state: "detached", timeout: 4000 })
    .catch(() => fail(page, "the resent delivery's exception did not close"));
  if (!asked.startsWith("Resend delivery whd_")) await fail(page, `the resend asked "${asked}"`);
  await page.screenshot({ path: join(output, "console-resent.png"), fullPage: true });

  // The platform's key lists its customers for the filter, by name; a suspended one is marked.
  // (A customer's key could not list them: its field takes an id as typed.)
  const suspended = page.locator(`#customers option[value="${suspendedId}"]`);
  await suspended.waitFor({ state: "attached", timeout: 3000 })
    .catch(() => fail(page, "the suspended customer is not offered in the filter"));
  if ((await suspended.textContent()) !== "Globex (suspended)") {
    await fail(page, `the suspended customer is offered as "${await suspended.textContent()}"`);
  }
  await accessible(page, "the platform's board");
  await fitsOnAPhone(page, "the platform's board");

  // The operations view, as the platform's operator: Acme's completed payouts by status and
  // type; and the payout found again by its transaction's id.
  await page.getByRole("button", { name: "Operations" }).click();
  await page.getByLabel("Status").selectOption("completed");
  await page.getByLabel("Type").selectOption("payout");
  await page.getByRole("button", { name: "List" }).click();
  await page.locator(`#operations li[data-id="${operationId}"]`, { hasText: "completed · payout 125,000 CLP" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the completed payout is not listed by status and type"));
  // Narrowed to today and to its total, it is still there; past its total, nothing is.
  const today = await page.evaluate(() => { const d = new Date(); return d.getFullYear() + "-" + String(d.getMonth() + 1).padStart(2, "0") + "-" + String(d.getDate()).padStart(2, "0"); });
  await page.getByLabel("Made from").fill(today);
  await page.getByLabel("through").fill(today);
  await page.getByLabel("Total at least").fill("125000");
  await page.getByLabel("at most").fill("125000");
  await page.getByRole("button", { name: "List" }).click();
  await page.locator(`#operations li[data-id="${operationId}"]`).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the completed payout is not listed within today and its total"));
  await page.getByLabel("Total at least").fill("125001");
  await page.getByLabel("at most").fill("");
  await page.getByRole("button", { name: "List" }).click();
  await page.locator("#operations li", { hasText: "No operation found." }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "a total above every payout's still lists something"));
  await page.getByLabel("Total at least").fill("");
  await page.getByLabel("Status").selectOption("rejected");
  await page.getByRole("button", { name: "List" }).click();
  await page.locator("#operations li", { hasText: "No operation found." }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "a status nothing has still lists something"));
  await accessible(page, "the operations view");
  await fitsOnAPhone(page, "the operations view");
  const transactionId = await page.locator("#transactions li").first().getAttribute("data-id");
  await page.evaluate(() => { document.getElementById("detail").hidden = true; });
  await page.getByLabel("Id").fill(transactionId);
  await page.getByRole("button", { name: "Open", exact: true }).click();
  await page.locator("#detail-title", { hasText: operationId }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the payout was not found by its transaction's id"));
  // Its webhook deliveries: the creation its receiver refused, failed, to be resent from here.
  await page.locator("#deliveries li", { hasText: " to http" }).filter({ hasText: "· failed ·" })
    .getByRole("button", { name: "Resend" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the operation's failed delivery is not shown with a resend"));
  // Found again by its transaction's rail reference, and among those paying its beneficiary.
  const railReference = (await page.locator(`#transactions li[data-id="${transactionId}"]`).textContent()).match(/ ref (\S+)/)[1];
  await page.getByLabel("Find by").selectOption("rail_reference");
  await page.getByLabel("Value", { exact: true }).fill(railReference);
  await page.getByRole("button", { name: "Find", exact: true }).click();
  await page.locator(`#operations li[data-id="${operationId}"]`).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the payout is not found by its rail reference"));
  const byReference = await page.locator("#operations li[data-id]").evaluateAll((rows) => rows.map((r) => r.dataset.id));
  if (byReference.join() !== operationId) await fail(page, `the rail reference finds ${byReference}`);
  await page.getByLabel("Find by").selectOption("beneficiary_id");
  await page.getByLabel("Value", { exact: true }).fill("12345678-5");
  await page.getByRole("button", { name: "Find", exact: true }).click();
  await page.locator(`#operations li[data-id="${operationId}"]`, { hasText: "completed · payout 125,000 CLP" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the payout is not found by its beneficiary's id"));
  await accessible(page, "the operations view, found by value");
  // The platform's key may list Acme's users: who signed, and who acted in the history, by name.
  const signedBy = await page.locator("#detail-summary").textContent();
  if (!signedBy.includes("approvals 1 of 1 (approver): Member (member-")) await fail(page, `the signer is shown as "${signedBy}"`);
  await page.locator("#history li", { hasText: "user Member (member-" }).first().waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the history does not name the user who approved"));

  // The other views, as the platform's operator looking at Acme (picked by name): webhook
  // endpoints with their health, API keys, and schedules, one paused and resumed from the page.
  const acme = await page.locator("#customers option", { hasText: "Acme Payroll" }).first().getAttribute("value");
  await page.getByLabel("Customer").fill(acme);
  await page.getByRole("button", { name: "Show", exact: true }).click();
  await page.getByRole("button", { name: "Webhooks" }).click();
  await page.locator("#webhooks li", { hasText: "% delivered" }).first().waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the webhook endpoint and its health are not listed"));
  await accessible(page, "the webhooks view");
  await fitsOnAPhone(page, "the webhooks view");
  await page.getByRole("button", { name: "API keys" }).click();
  await page.locator("#keys li", { hasText: "active" }).first().waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the API keys are not listed"));
  await accessible(page, "the API keys view");
  await fitsOnAPhone(page, "the API keys view");
  await page.getByRole("button", { name: "Schedules" }).click();
  const schedule = page.locator(`#schedules li[data-id="${scheduleId}"]`);
  await schedule.filter({ hasText: "payout of 40,000 CLP in 1 item" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the schedule is not listed with what it makes"));
  await accessible(page, "the schedules view");
  await fitsOnAPhone(page, "the schedules view");
  // Its occurrences: the next ones it will make, and (none yet) those it made.
  await schedule.getByRole("button", { name: "Occurrences" }).click();
  await schedule.locator("li", { hasText: "upcoming · " }).nth(4).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the schedule's next five occurrences are not listed"));
  await schedule.getByRole("button", { name: "Occurrences" }).click();
  await schedule.getByRole("button", { name: "Pause" }).click();
  await schedule.filter({ hasText: "paused" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the paused schedule does not say so"));
  await schedule.getByRole("button", { name: "Resume" }).click();
  await schedule.filter({ hasText: "active" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the resumed schedule does not say so"));
  // Initech's account and payroll file, and the platform's statement with its break.
  const initech = await page.locator("#customers option", { hasText: "Initech" }).first().getAttribute("value");
  await page.getByLabel("Customer").fill(initech);
  await page.getByRole("button", { name: "Show", exact: true }).click();
  // The board says how many of Initech's 52 waiting operations (51 payouts and its file's) it
  // lists, and lists fifty more when asked.
  await page.getByRole("button", { name: "Board" }).click();
  const more = page.locator("#more-pending");
  await more.filter({ hasText: "Showing 50 of 52." }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the pending column does not say it lists 50 of 52"));
  await more.getByRole("button", { name: "Show 50 more" }).click();
  await page.locator("#column-pending li[data-id]").nth(51).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the next page of waiting operations was not listed"));
  if ((await more.textContent()) !== "") await fail(page, `with every one listed, the column says "${await more.textContent()}"`);
  await page.getByRole("button", { name: "Accounts" }).click();
  const account = page.locator("#accounts li", { hasText: "Initech payroll" });
  await account.filter({ hasText: "available 0 CLP" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the account and its balance are not listed"));
  await account.getByRole("button", { name: "Movements" }).click();
  await account.locator("li", { hasText: "No movements." }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the account's movements were not read"));
  await accessible(page, "the accounts view");
  await fitsOnAPhone(page, "the accounts view");
  await page.getByRole("button", { name: "Files" }).click();
  await page.locator("#files li", { hasText: "2 lines · 12,000 CLP · workflow two_step" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the payroll file is not listed with its lines and total"));
  await accessible(page, "the files view");
  await fitsOnAPhone(page, "the files view");
  await page.getByRole("button", { name: "Reconciliations" }).click();
  const statement = page.locator("#reconciliations li", { hasText: "psp-local:sandbox" }).first();
  await statement.filter({ hasText: "unmatched 1" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the statement is not listed with its outcomes"));
  await statement.getByRole("button", { name: "Lines not matched" }).click();
  const stranger = statement.locator("li", { hasText: "unmatched · debit 12,345 CLP · ref sbx_stranger · work item wi_" });
  await stranger.filter({ hasText: " open" }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "the statement's break is not listed with its open work item"));
  // Settled from the page with the operator's reason: its work item is done.
  let settleAsked = "";
  page.once("dialog", (dialog) => { settleAsked = dialog.message(); dialog.accept("Booked by hand: a stranger's debit"); });
  await stranger.getByRole("button", { name: "Settle" }).click();
  await stranger.filter({ hasText: " done" }).waitFor({ timeout: 4000 })
    .catch(() => fail(page, "the break's work item was not settled from the page"));
  if (!settleAsked.includes("settled?")) await fail(page, `settling asked "${settleAsked}"`);
  if (await stranger.getByRole("button", { name: "Settle" }).count()) await fail(page, "a settled break still offers Settle");
  await accessible(page, "the reconciliations view");
  await fitsOnAPhone(page, "the reconciliations view");
  await page.screenshot({ path: join(output, "console-schedules.png"), fullPage: true });

  // Acme's charts, drawn by uPlot from /v1/charts: each figure a canvas, and in words the
  // numbers the API gives (its payouts by status, its approvals by SLA used, its exceptions).
  await page.getByLabel("Customer").fill(acme);
  await page.getByRole("button", { name: "Show", exact: true }).click();
  await page.getByRole("button", { name: "Charts" }).click();
  for (const chart of ["hourly", "ageing", "exceptions"]) {
    await page.locator(`#chart-${chart} canvas`).waitFor({ timeout: 4000 })
      .catch(() => fail(page, `the ${chart} chart was not drawn`));
  }
  const charts = await page.evaluate(async (acme) => {
    const reply = await fetch("/v1/charts?customer_id=" + acme, { headers: { Authorization: "Bearer " + sessionStorage.getItem("opsKey") } });
    return reply.json();
  }, acme);
  const reached = {};
  for (const line of charts.transactions_per_hour.series.filter((line) => line.direction === "credit")) {
    reached[line.status] = (reached[line.status] || 0) + line.counts.reduce((a, b) => a + b, 0);
  }
  if (!(reached.confirmed > 0)) await fail(page, `Acme's chart has no confirmed payout: ${JSON.stringify(charts)}`);
  const hourly = await page.locator("#words-hourly").textContent();
  for (const [status, count] of Object.entries(reached)) {
    if (!hourly.includes(`${count.toLocaleString("en-US")} ${status.replaceAll("_", " ")}`)) await fail(page, `"${hourly}" lacks ${count} ${status}`);
  }
  const ageing = charts.approvals_ageing;
  const ageingWords = await page.locator("#words-ageing").textContent();
  if (!ageingWords.startsWith(`${ageing.open} open of a ${ageing.sla_minutes}-minute SLA: ${ageing.under_half} under half`)) {
    await fail(page, `the ageing says "${ageingWords}" for ${JSON.stringify(ageing)}`);
  }
  const opened = charts.exceptions_per_day.opened.reduce((a, b) => a + b, 0);
  if (!(await page.locator("#words-exceptions").textContent()).startsWith(`The last 14 days: ${opened} opened`)) {
    await fail(page, `the exceptions chart does not say ${opened} opened`);
  }
  await page.getByLabel("Rail", { exact: true }).selectOption("psp-local:sandbox");
  await page.locator("#words-hourly", { hasText: "psp-local:sandbox, the last 24 hours: " }).waitFor({ timeout: 3000 })
    .catch(() => fail(page, "choosing a rail does not redraw the chart for it"));
  await accessible(page, "the charts view");
  await fitsOnAPhone(page, "the charts view");
  await page.screenshot({ path: join(output, "console-charts.png"), fullPage: true });
  await page.getByRole("button", { name: "Board" }).click();
  await page.locator("#view-board").waitFor({ timeout: 2000 });

  // "Forget key" leaves nothing of it in the tab.
  await page.getByRole("button", { name: "Forget key" }).click();
  await page.getByRole("heading", { name: "Operations console" }).waitFor();
  const left = await page.evaluate(() => [sessionStorage.getItem("opsKey"), document.getElementById("key").value]);
  if (left[0] !== null || left[1] !== "") await fail(page, `the key was not forgotten: ${JSON.stringify(left)}`);
  if (refusedByPolicy.length) await fail(page, `the page's policy refused: ${refusedByPolicy.join("; ")}`);
  console.log(`screenshots: ${join(output, "console.png")}, ${join(output, "console-approved.png")}, ${join(output, "console-resent.png")}, ${join(output, "console-charts.png")}`);
} finally {
  await context.close();
}
