// The operations console served by the stack as SAM deploys it (`GET /board`, redirected to
// `GET /console`, through `sam local start-api`), reading the stack's API in Debian's Chromium:
// an operator types the platform key, finds the waiting payout, approves it from the page
// (confirming what it moves) and sees it leave Pending approval.
// Called by tests/stack/test_stack.py:
//   node stack-board.mjs <base url> <platform key> <operation id> <output dir>
import { join } from "node:path";
import { launch } from "./chromium.mjs";

const [base, key, operationId, output] = process.argv.slice(2);
const context = await launch("ops-stack-board-chromium");
const fail = async (page, message) => {
  await page.screenshot({ path: join(output, "stack-board-failure.png"), fullPage: true });
  throw new Error(message);
};
try {
  const page = await context.newPage();
  await page.goto(base + "/board");
  await page.getByRole("heading", { name: "Operations console" }).waitFor();
  await page.getByLabel("API key", { exact: true }).fill(key);
  await page.getByRole("button", { name: "Show", exact: true }).click();
  // Each function's first request starts its container: the stack is given a while.
  const waiting = page.locator(`#column-pending li[data-id="${operationId}"]`);
  await waiting.waitFor({ timeout: 60000 }).catch(() => fail(page, "the waiting operation is not in Pending approval"));
  page.once("dialog", (dialog) => dialog.accept());
  await waiting.getByRole("button", { name: "Approve" }).click();
  await waiting.waitFor({ state: "detached", timeout: 60000 })
    .catch(() => fail(page, "the approved operation did not leave Pending approval"));
  await page.screenshot({ path: join(output, "stack-board.png"), fullPage: true });
} finally {
  await context.close();
}
