// node-saml's own parser and XPath helpers (the ones it verifies signatures with): @xmldom/xmldom's
// and xpath's typings pull the DOM library into every file, which breaks Bun's fetch types.
import { parseDomFromString, xpath } from "@node-saml/node-saml/lib/xml.js";

/** The little of a DOM element the SAML module reads. */
export interface XmlElement {
  localName: string;
  textContent: string | null;
  getAttribute(name: string): string | null;
}
export interface XmlDocument {
  documentElement: XmlElement | null;
}

/** Thrown for input that is not well-formed XML or declares a document type (no DTD is ever read). */
export class NotXml extends Error {
  override name = "NotXml";
}

export async function parseXml(xml: string): Promise<XmlDocument> {
  if (/<!DOCTYPE/i.test(xml)) throw new NotXml("a document type declaration is not accepted");
  let document: XmlDocument;
  try {
    document = (await parseDomFromString(xml)) as unknown as XmlDocument;
  } catch {
    throw new NotXml("not well-formed XML");
  }
  if (!document.documentElement) throw new NotXml("not well-formed XML");
  return document;
}

type DomNode = Parameters<typeof xpath.selectElements>[0];

export const selectElements = (node: XmlElement | XmlDocument, path: string): XmlElement[] =>
  xpath.selectElements(node as unknown as DomNode, path) as unknown as XmlElement[];

export const selectAttributeValues = (node: XmlElement | XmlDocument, path: string): string[] =>
  xpath.selectAttributes(node as unknown as DomNode, path).map((attribute) => attribute.value);
