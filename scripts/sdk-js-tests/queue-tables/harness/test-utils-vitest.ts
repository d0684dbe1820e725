// Harness stand-in for @azure-tools/test-utils-vitest (not published to npm): only what the
// suites use. toSupportTracing checks the client-side tracing only (no server involved): here it
// runs the operation with tracing options and passes if it succeeds.
export function getYieldedValue<T>(item: IteratorResult<T>): T {
  if (item.done) {
    throw new Error("Expected a yielded value, got a return value instead");
  }
  return item.value;
}

export async function toSupportTracing(
  this: unknown,
  callback: (options: any) => Promise<unknown>,
  _expectedSpanNames: string[],
  options?: Record<string, unknown>,
): Promise<{ pass: boolean; message: () => string }> {
  try {
    await callback({ ...(options ?? {}), tracingOptions: {} });
    return { pass: true, message: () => "ran with tracing options" };
  } catch (error: any) {
    return { pass: false, message: () => `failed: ${error?.message ?? error}` };
  }
}
