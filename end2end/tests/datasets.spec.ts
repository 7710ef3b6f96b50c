// Datasets in a real browser: make one on the Datasets page (a taken name is
// explained at the form), add a finished run to it from the run's trace page,
// and find the item on the dataset's page with its prompt, what it expects,
// its recorded tool result and a link back to the run; an older version
// still reads as it was.
import { expect, finishedRun, hydrated, test } from './fixtures';

test('a run added to a dataset from its trace shows on the dataset page, version by version', async ({ page, request }) => {
  const name = `sums ${Date.now()}`;
  await page.goto('/datasets');
  await hydrated(page);
  const form = page.getByTestId('new-dataset');
  await form.getByTestId('dataset-name').fill(name);
  await form.getByTestId('dataset-description').fill('Sums the calculator must get right');
  await form.getByTestId('dataset-create').click();
  await expect(page.getByTestId('dataset-title')).toHaveText(name);
  await expect(page.getByTestId('dataset-items-empty')).toBeVisible();
  const datasetUrl = page.url();
  const datasetId = decodeURIComponent(new URL(datasetUrl).pathname.split('/').pop()!);

  // The same name again is refused at the form.
  await page.goto('/datasets');
  await hydrated(page);
  await page.getByTestId('dataset-name').fill(name);
  await page.getByTestId('dataset-create').click();
  await expect(page.getByTestId('dataset-error')).toContainText(name);

  const first = await finishedRun(request, 'What is 2 + 3?');
  const second = await finishedRun(request, 'What is 6 * 7?');
  for (const [run, version] of [[first, '1'], [second, '2']]) {
    await page.goto(`/runs/${run}`);
    await hydrated(page);
    const add = page.getByTestId('to-dataset');
    await add.getByTestId('to-dataset-choice').selectOption(datasetId);
    await add.getByTestId('to-dataset-submit').click();
    await expect(add.getByTestId('to-dataset-added')).toContainText(`version ${version}`);
  }

  await page.goto(datasetUrl);
  await hydrated(page);
  await expect(page.getByTestId('dataset-facts')).toContainText('2 items at version 2');
  const items = page.getByTestId('dataset-item');
  await expect(items).toHaveCount(2);
  const sum = items.filter({ hasText: 'What is 2 + 3?' });
  await expect(sum).toContainText('5');
  await expect(sum).toContainText('1 recorded result');
  await expect(sum.getByRole('link')).toHaveAttribute('href', `/runs/${first}`);

  // Version 1 held the first run only.
  await page.getByTestId('dataset-version').fill('1');
  await page.getByRole('button', { name: 'Show' }).click();
  await expect(page.getByTestId('dataset-old-version')).toContainText('Version 1 of 2');
  await expect(page.getByTestId('dataset-item')).toHaveCount(1);
  await expect(page.getByTestId('dataset-item')).toContainText('What is 2 + 3?');
});

test('items pasted as CSV are added as one version, and a bad row keeps nothing', async ({ page, request }) => {
  const made = await request.post('/api/datasets', { data: { name: `pasted ${Date.now()}` } });
  expect(made.status(), await made.text()).toBe(201);
  const id = (await made.json()).id as string;
  await page.goto(`/datasets/${id}`);
  await hydrated(page);
  const upload = page.getByTestId('upload');
  await upload.locator('summary').click();
  await upload.getByTestId('upload-content').fill('prompt,expected,tags\nWhat is 2 + 2?,4,easy;sums\nWhat is 3 * 3?,9,sums\n');
  await upload.getByTestId('upload-submit').click();
  await expect(page.getByTestId('dataset-facts')).toContainText('2 items at version 1');
  await expect(page.getByTestId('dataset-item')).toHaveCount(2);
  await expect(page.getByTestId('dataset-item').filter({ hasText: 'What is 2 + 2?' })).toContainText('easy');

  // A row without a prompt: the error names its line, and nothing is added.
  const again = page.getByTestId('upload');
  await expect(again).toHaveAttribute('open', '');
  await expect(again.getByTestId('upload-added')).toContainText('Added 2 items');
  await again.getByTestId('upload-content').fill('prompt,expected\n,5\n');
  await again.getByTestId('upload-submit').click();
  await expect(page.getByTestId('upload-error')).toContainText('line 2');
  await expect(page.getByTestId('dataset-facts')).toContainText('2 items at version 1');
});

test('an item is edited and deleted from the dataset page, each change a new version', async ({ page, request }) => {
  const made = await request.post('/api/datasets', { data: { name: `edits ${Date.now()}` } });
  expect(made.ok(), await made.text()).toBeTruthy();
  const dataset = (await made.json()).id as string;
  const added = await request.post(`/api/datasets/${dataset}/items`, { data: { items: [
    { input: { prompt: 'Capital of France?' }, expected: 'Lyon', tags: ['geo'] },
    { input: { prompt: 'Capital of Spain?' }, expected: 'Madrid' },
  ] } });
  expect(added.ok(), await added.text()).toBeTruthy();
  await page.goto(`/datasets/${dataset}`);
  await hydrated(page);
  const france = page.getByTestId('dataset-item').filter({ hasText: 'Capital of France?' });
  await france.getByTestId('item-edit').click();
  await france.getByTestId('item-expected').fill('Paris');
  await france.getByTestId('item-tags').fill('geo, capitals');
  await france.getByTestId('item-save').click();
  await expect(page.getByTestId('dataset-facts')).toContainText('2 items at version 2');
  const edited = page.getByTestId('dataset-item').filter({ hasText: 'Capital of France?' });
  await expect(edited).toContainText('Paris');
  await expect(edited).toContainText('capitals');

  const spain = page.getByTestId('dataset-item').filter({ hasText: 'Capital of Spain?' });
  await spain.getByTestId('item-edit').click();
  await spain.getByTestId('item-delete').click();
  await expect(page.getByTestId('dataset-facts')).toContainText('1 item at version 3');
  await expect(page.getByTestId('dataset-item').filter({ hasText: 'Capital of Spain?' })).toHaveCount(0);
  // Version 1 still reads as it was.
  await page.goto(`/datasets/${dataset}?version=1`);
  await hydrated(page);
  await expect(page.getByTestId('dataset-item').filter({ hasText: 'Capital of France?' })).toContainText('Lyon');
  await expect(page.getByTestId('dataset-item')).toHaveCount(2);
  // An older version is read, not edited.
  await expect(page.getByTestId('item-edit')).toHaveCount(0);
});
