/**
 * Typings for bpmn-moddle 10 (ESM, a named `BpmnModdle` export, no typings of its own
 * that resolve under NodeNext). Only what engine/render/bpmn.ts and its tests use.
 */
declare module 'bpmn-moddle' {
  /** A model element: its `$type` and the BPMN properties set on it. */
  export interface ModdleElement {
    $type: string;
    id?: string;
    [property: string]: unknown;
  }

  export interface FromXmlResult {
    rootElement: ModdleElement;
    warnings: { message: string }[];
    elementsById: Record<string, ModdleElement>;
    references: unknown[];
  }

  export class BpmnModdle {
    constructor(packages?: Record<string, unknown>, options?: Record<string, unknown>);
    create(type: string, attrs?: Record<string, unknown>): ModdleElement;
    toXML(element: ModdleElement, options?: { format?: boolean; preamble?: boolean }): Promise<{ xml: string }>;
    fromXML(xml: string, typeName?: string, options?: Record<string, unknown>): Promise<FromXmlResult>;
  }
}
