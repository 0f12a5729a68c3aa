import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'vitest';

export interface RestAnswer {
  status: number;
  headers: Headers;
  /** The parsed JSON body (null for an empty one). */
  body: Record<string, unknown> & { code?: string };
}

export interface RestCall {
  apiKey?: string | null;
  params?: Record<string, string>;
  query?: Record<string, string>;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * A plain-HTTP client for the REST face, as a Java or Go integrator's would be, that checks every
 * answer against the server's own OpenAPI document: the schema for that path, method and status
 * (I15: every REST response validates against the document). A status the document does not list
 * for the operation fails the test too.
 */
export async function restClient(baseUrl: string) {
  const document = (await (await fetch(`${baseUrl}/openapi.json`)).json()) as OpenApiDocument;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addSchema(document as object, 'openapi.json');

  function validate(method: string, template: string, answer: RestAnswer): void {
    const operation = document.paths[template]?.[method.toLowerCase()];
    expect(operation, `${method} ${template} is in the document`).toBeTruthy();
    const response = operation?.responses[String(answer.status)];
    expect(response, `${method} ${template} documents status ${answer.status}`).toBeTruthy();
    const contentType = (answer.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
    const media = response?.content?.[contentType];
    expect(media, `${method} ${template} ${answer.status} documents ${contentType}`).toBeTruthy();
    const pointer = [
      'paths',
      template,
      method.toLowerCase(),
      'responses',
      String(answer.status),
      'content',
      contentType,
      'schema',
    ]
      .map((part) => part.replaceAll('~', '~0').replaceAll('/', '~1'))
      .join('/');
    const check = ajv.getSchema(`openapi.json#/${pointer}`);
    if (!check) throw new Error(`no schema at ${pointer}`);
    const valid = check(answer.body);
    expect(valid ? [] : check.errors, `${method} ${template} ${answer.status} matches its schema`).toEqual(
      [],
    );
    for (const name of Object.keys(response?.headers ?? {})) {
      if (response?.headers?.[name]?.required) {
        expect(answer.headers.get(name), `${name} on ${answer.status}`).not.toBeNull();
      }
    }
  }

  async function call(method: string, template: string, options: RestCall = {}): Promise<RestAnswer> {
    let path = template;
    for (const [name, value] of Object.entries(options.params ?? {})) {
      path = path.replace(`{${name}}`, encodeURIComponent(value));
    }
    const query = new URLSearchParams(options.query ?? {}).toString();
    const headers: Record<string, string> = { ...options.headers };
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
    if (options.body !== undefined) headers['content-type'] ??= 'application/json';
    const response = await fetch(`${baseUrl}${path}${query ? `?${query}` : ''}`, {
      method,
      headers,
      ...(options.body !== undefined
        ? { body: typeof options.body === 'string' ? options.body : JSON.stringify(options.body) }
        : {}),
    });
    const text = await response.text();
    const answer: RestAnswer = {
      status: response.status,
      headers: response.headers,
      body: text ? (JSON.parse(text) as RestAnswer['body']) : {},
    };
    validate(method, template, answer);
    return answer;
  }

  return { document, call };
}

export interface OpenApiDocument {
  openapi: string;
  paths: Record<
    string,
    Record<
      string,
      {
        operationId: string;
        responses: Record<
          string,
          {
            content?: Record<string, { schema: unknown }>;
            headers?: Record<string, { required?: boolean }>;
          }
        >;
      }
    >
  >;
  webhooks?: Record<string, unknown>;
  components: { schemas: Record<string, unknown> };
}
