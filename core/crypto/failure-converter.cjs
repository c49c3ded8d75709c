// Temporal failures with their message and stack trace moved into a payload (issue 55), which
// the sealing codec then seals like any other: an activity's error text (a failed query, a
// provider's answer) is no longer readable in Temporal's history, its database or its UI. A
// plain CommonJS file because workers load it by path (`failureConverterPath`), from the
// sources under tsx and from dist/ when built (scripts/build.ts copies it), and the workflow
// bundle includes it the same way.
const { DefaultFailureConverter } = require('@temporalio/common');

exports.failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
