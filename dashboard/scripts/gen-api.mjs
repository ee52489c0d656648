// The API's TypeScript types, generated from proto/leapfrog/v1/*.proto into
// gen/ (git-ignored) by Debian's protoc and ts-proto (pinned by
// package-lock.json). The options make the types describe protobuf's JSON
// mapping as the coordinator prints it (coordinator/http/proto_json.h):
//   onlyTypes, useJsonWireFormat  interfaces only, shaped as the JSON: a
//                                 Timestamp or Duration is its string
//   snakeToCamel=false            keys as the .proto spells them
//                                 (preserve_proto_field_names)
//   forceLong=string              64-bit integers are JSON strings
//   enumsAsLiterals               enums are unions of their names
//   unrecognizedEnum=false        no UNRECOGNIZED member
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(dirname(fileURLToPath(import.meta.url)));
const protoRoot = join(here, '..', 'proto');
const out = join(here, 'gen');
const plugin = join(here, 'node_modules', '.bin', 'protoc-gen-ts_proto');
const protos = readdirSync(join(protoRoot, 'leapfrog', 'v1'))
  .filter((f) => f.endsWith('.proto'))
  .sort()
  .map((f) => join(protoRoot, 'leapfrog', 'v1', f));
const options = [
  'onlyTypes=true',
  'useJsonWireFormat=true',
  'snakeToCamel=false',
  'forceLong=string',
  'enumsAsLiterals=true',
  'unrecognizedEnum=false',
  'exportCommonSymbols=false',
  'esModuleInterop=true',
].join(',');

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
try {
  execFileSync('protoc', [`--plugin=protoc-gen-ts_proto=${plugin}`, `-I${protoRoot}`, `--ts_proto_out=${out}`, `--ts_proto_opt=${options}`, ...protos], {
    stdio: 'inherit',
  });
} catch (e) {
  console.error(`gen-api: protoc failed (is Debian's protobuf-compiler installed?): ${e.message}`);
  process.exit(1);
}
