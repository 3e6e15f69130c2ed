// static/chatapp/image_files.js: a data: URL's bytes and a picture's download name.

import assert from "node:assert/strict";
import { test } from "node:test";

import { dataUrlBytes, downloadName } from "../../static/chatapp/image_files.js";

const PNG_HEAD = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

test("a base64 PNG data URL gives its type and exact bytes", () => {
  const url = `data:image/png;base64,${Buffer.from(PNG_HEAD).toString("base64")}`;
  const found = dataUrlBytes(url);
  assert.equal(found.type, "image/png");
  assert.deepEqual([...found.bytes], PNG_HEAD);
});

test("bytes above 127 survive the decoding", () => {
  const bytes = [0, 127, 128, 200, 255];
  const found = dataUrlBytes(`data:image/webp;base64,${Buffer.from(bytes).toString("base64")}`);
  assert.deepEqual([...found.bytes], bytes);
});

for (const url of [
  "data:image/svg+xml;base64,PHN2Zz4=", // not a raster type
  "data:image/png,%89PNG", // not base64
  "data:image/png;base64,a b", // not base64 text
  "/c/attachments/1/0/",
  "",
  null,
]) {
  test(`no bytes from ${JSON.stringify(url)}`, () => {
    assert.equal(dataUrlBytes(url), null);
  });
}

test("the download name is the picture's number and its type's extension", () => {
  assert.equal(downloadName("image/png", 2), "image-2.png");
  assert.equal(downloadName("image/jpeg", 1), "image-1.jpg");
  assert.equal(downloadName("IMAGE/WEBP; q=1", 3), "image-3.webp");
  assert.equal(downloadName("image/gif", 0), "image.gif");
  assert.equal(downloadName("application/octet-stream", 1), "image-1");
});
