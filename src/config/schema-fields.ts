import { z } from "zod";

/** Field builders of the configuration schema (schema.ts), each carrying its reference text. */
export const secret = (description: string) => ({ description, secret: true });

export const int = (min: number, fallback: number, description: string) =>
  z.number().int().min(min).default(fallback).meta({ description });
export const optionalInt = (min: number, description: string) =>
  z.number().int().min(min).optional().meta({ description });
export const flag = (fallback: boolean, description: string) =>
  z.boolean().default(fallback).meta({ description });
export const strings = (description: string) => z.array(z.string()).default([]).meta({ description });
